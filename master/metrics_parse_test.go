package master

import dto "github.com/prometheus/client_model/go"

// metricFamily is a parsed metric family with a lookup by labels.
type metricFamily struct{ *dto.MetricFamily }

// value is the value of the first sample whose labels include labels
// (name, value, name, value, ...), -1 if none.
func (f *metricFamily) value(labels ...string) float64 {
next:
	for _, m := range f.Metric {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, lp := range m.Label {
				if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Untyped != nil:
			return m.Untyped.GetValue()
		case m.Summary != nil:
			return float64(m.Summary.GetSampleCount())
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	return -1
}
