package master

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/stretchr/testify/require"

	"jobmaster/jobspec"
)

// emptyVertices is the body of a batch of one submission whose spec has n
// vertices, each an empty map (one byte).
func emptyVertices(n int) []byte {
	var b bytes.Buffer
	b.WriteString("\x81\xa4subs\x91\x81\xa4spec\x81\xa8vertices\xdd")
	_ = binary.Write(&b, binary.BigEndian, uint32(n))
	b.Write(bytes.Repeat([]byte{0x80}, n))
	return b.Bytes()
}

// A body of empty vertices is refused by its count before any vertex is
// made: the decoder made a 104-byte Vertex of each byte (6 MiB of them
// took a master to 2 GB), and only then was anything counted.
func TestABatchIsCountedBeforeItIsDecoded(t *testing.T) {
	body := emptyVertices(256 << 10)
	var before, after runtime.MemStats
	var err error
	runtime.ReadMemStats(&before)
	_, err = decodeBatch(body)
	runtime.ReadMemStats(&after)
	require.EqualError(t, err, "submission 0: vertices: 262144 vertices, at most 1000 allowed")
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(4*len(body)), "bytes allocated for a body of %d", len(body))

	encode := func(b relayBatch) []byte {
		var data []byte
		require.NoError(t, codec.NewEncoderBytes(&data, relayHandle).Encode(&b))
		return data
	}
	spec := func(inputs, args int) *jobspec.Spec {
		s := &jobspec.Spec{Vertices: []jobspec.Vertex{{ID: "a", Parallelism: 1, Command: make([]string, args)}}}
		for range inputs {
			s.Vertices[0].Inputs = append(s.Vertices[0].Inputs, jobspec.Input{From: "b"})
		}
		return s
	}
	for _, c := range []struct {
		name  string
		batch relayBatch
		err   string
	}{
		{"too many submissions", relayBatch{Submissions: make([]submission, relayMaxItems+1)}, "a batch holds 1 to 512 submissions, not 513"},
		{"too many inputs", relayBatch{Submissions: []submission{{ID: "x"}, {ID: "y", Spec: spec(jobspec.MaxInputs+1, 1)}}},
			"submission 1: vertices[0].inputs: 1000 inputs, at most 999 allowed (one from each other vertex)"},
		{"too heavy", relayBatch{Submissions: []submission{{ID: "x", Spec: spec(0, relayMaxBytes/4)}}},
			"a batch weighs at most 4194304 bytes (as a follower weighs its submissions), and this one's counts alone weigh 4194432"},
	} {
		_, err := decodeBatch(encode(c.batch))
		require.EqualError(t, err, c.err, c.name)
	}
	for name, body := range map[string][]byte{
		"a struct as an array": []byte("\x91\x91\x94\xa1x\xc2\xa0\x80"),
		"a count past the end": []byte("\x81\xa4subs\xdc\x01\x2c\x80"),
		"a key not a string":   []byte("\x81\x01\x80"),
		"bytes after":          append(encode(relayBatch{Submissions: []submission{{ID: "x"}}}), 0xc0),
		"cut short":            encode(relayBatch{Submissions: []submission{{ID: "x", Spec: spec(1, 1)}}})[:20],
	} {
		_, err := decodeBatch(body)
		require.ErrorContains(t, err, "malformed batch: ", name)
	}
}

// What a follower sends passes the scan, and decodes as it was sent: specs
// at the limits, with every field set.
func TestRelayedBatchesAtTheLimitsAreScannedThrough(t *testing.T) {
	var vs []string
	for i := range jobspec.MaxVertices {
		in := ""
		if i > 0 {
			var ins []string
			for j := max(0, i-50); j < i; j++ {
				ins = append(ins, fmt.Sprintf(`{"from":"v%d","mode":"blocking","distribution":"all-to-all"}`, j))
			}
			in = `,"inputs":[` + strings.Join(ins, ",") + `]`
		}
		vs = append(vs, fmt.Sprintf(`{"id":"v%d","parallelism":1,"command":["/bin/true","%d",""],"env":{"A":"1","B":""},"slot_sharing_group":"g","resources":{"cpu_millis":10}%s}`, i, i, in))
	}
	wide, err := jobspec.Parse([]byte(`{"name":"wide","vertices":[` + strings.Join(vs, ",") + `],"restart":{"strategy":"exponential-delay"},"failover":"full"}`))
	require.NoError(t, err)
	long, err := jobspec.Parse([]byte(`{"vertices":[{"id":"v","parallelism":1,"command":["sh","` + strings.Repeat("x", jobspec.MaxArgBytes) + `"],"env":{"X":"` + strings.Repeat("y", jobspec.MaxArgBytes-2) + `"}}]}`))
	require.NoError(t, err)
	small := mustSpec(t, simpleJob)
	batch := relayBatch{Submissions: []submission{{ID: "wide", Spec: wide, Secret: "s"}, {ID: "long", Spec: long, Generated: true}}}
	for i := range relayMaxItems - 2 {
		batch.Submissions = append(batch.Submissions, submission{ID: fmt.Sprintf("s%d", i), Spec: small})
	}
	size := 0
	for _, sub := range batch.Submissions {
		size += specSize(sub)
	}
	require.LessOrEqual(t, size, relayMaxBytes, "a batch a follower would send")
	var data []byte
	require.NoError(t, codec.NewEncoderBytes(&data, relayHandle).Encode(&batch))
	got, err := decodeBatch(data)
	require.NoError(t, err)
	require.Equal(t, batch, got)
}

// A command array that counts more elements than the bytes after its
// header hold is refused as such: its bound was the bytes before the
// header, and the scan called a missing error for it (a panic, answered
// 500 with a stack trace in the log for each such request).
func TestABatchWhoseCommandCountsMoreThanItsBytesIsRefused(t *testing.T) {
	_, err := decodeBatch([]byte("\x81\xa4subs\x91\x81\xa4spec\x81\xa8vertices\x91\x81\xa7command\xdd\xff\xff\xff\xff"))
	require.ErrorContains(t, err, "elements in 0 bytes")
}
