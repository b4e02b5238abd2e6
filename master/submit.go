package master

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"jobmaster/acl"
	"jobmaster/api"
	"jobmaster/fsm"
	"jobmaster/jobspec"
)

// A submission is one job to create, as the master that took the request
// parsed it: validated there, it reaches the leader either in the same
// process (this master leads) or in a relayed batch (relay.go), and the
// leader decides it the same way (decideSubmissions).
type submission struct {
	ID string `codec:"id"`
	// Generated: the id was chosen by the master that took a POST; the
	// answer is then 201 even when the job exists (a retry of the same
	// POST, relayed again).
	Generated bool `codec:"gen"`
	// Secret is the token's secret the request carried ("" without one);
	// the leader checks it against its own state.
	Secret string        `codec:"secret,omitempty"`
	Spec   *jobspec.Spec `codec:"spec"`
}

// answer is what a request is answered: its status, the Location header
// of a created job, and its JSON body.
type answer struct {
	Status   int    `codec:"status"`
	Location string `codec:"loc,omitempty"`
	Body     []byte `codec:"body"`
}

// write answers a request with a.
func (a answer) write(w http.ResponseWriter) {
	if a.Location != "" {
		w.Header().Set("Location", a.Location)
	}
	if a.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="jobmaster"`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(a.Status)
	_, _ = w.Write(a.Body)
}

func jsonAnswer(status int, v any) answer {
	status, body := jsonFormat.Body(status, v)
	return answer{Status: status, Body: body}
}

func errorAnswer(status int, msg string) answer {
	return jsonAnswer(status, api.Error{Error: msg})
}

// submit serves a submission: on the leader, or relayed to it.
func (m *Master) submit(w http.ResponseWriter, r *http.Request, id string, generated bool) {
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	if c := callerOf(r); c != nil && c.unverified {
		m.submitUnverified(w, r, body, id, generated)
		return
	}
	spec, err := jobspec.Parse(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if generated && id == "" {
		id = newJobID(spec.Name)
	}
	if generated {
		r.Header.Set(jobIDHeader, id) // forwarded with it; and named if no answer comes
	}
	sub := submission{ID: id, Generated: generated, Secret: requestSecret(r), Spec: spec}
	m.leaderDo(w, r, func(w http.ResponseWriter, r *http.Request, s *session) error {
		a, err := m.decideSubmissions(r.Context(), s, []submission{sub}, callerOf(r))
		if err != nil {
			return err
		}
		a[0].write(w)
		return nil
	}, func(addr string) delivery {
		a, err := m.relay.submit(r.Context(), addr, sub)
		switch {
		case errors.Is(err, errRelayUnknown):
			// A leader of an older version: the request as it came.
			hops, _ := strconv.Atoi(r.Header.Get(hopsHeader))
			if hops >= maxHops {
				return notSent
			}
			return m.forward(w, r, body, addr, hops+1)
		case errors.Is(err, errRelayFull):
			return leaderBusy
		case err != nil:
			m.log.Debug("relay to leader failed", "leader", addr, "err", err)
			return deliveryOf(err)
		}
		a.write(w)
		return answered
	})
}

// submitUnverified serves a submission whose token this master does not
// know (a token a moment old may not have reached it yet; or anyone's):
// the leader checks the token before the spec is read, as it came, since
// a body is work to parse, and an unknown token must not buy that work on
// every master it reaches. A POST's id is chosen here all the same, so
// that a retry cannot create the job twice: from no name, since the spec
// is not read here.
func (m *Master) submitUnverified(w http.ResponseWriter, r *http.Request, body []byte, id string, generated bool) {
	if generated && id == "" {
		id = newJobID("")
		r.Header.Set(jobIDHeader, id)
	}
	m.onLeader(w, r, body, func(w http.ResponseWriter, r *http.Request, body []byte, s *session) error {
		spec, err := jobspec.Parse(body)
		if err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return nil
		}
		a, err := m.decideSubmissions(r.Context(), s, []submission{{ID: id, Generated: generated, Secret: requestSecret(r), Spec: spec}}, callerOf(r))
		if err != nil {
			return err
		}
		a[0].write(w)
		return nil
	})
}

// decideSubmissions decides submissions on the leader, in session s: each
// is checked (its token, when ACLs are on and the caller is not known
// yet; the quotas; whether its regions can ever fit), and those that pass
// are proposed together, in one entry, or in several of at most
// maxEntryWeight subtasks each when they are many. It returns an answer
// for each, in order, or an error: a retryable one (see retryable) when
// leadership was lost meanwhile, or when some of the submissions were
// committed and the rest were not (errPartlyDecided: decided again, those
// committed are found to exist). known is the caller when this master
// already checked the submissions' token (one submission, from a request
// it took itself).
//
// Every master applies a job's subtasks in one go: many wide jobs in one
// entry held the state for seconds on each master (reads and the
// executors' heartbeats waited). An entry carries at most maxEntryWeight
// subtasks (the proposer keeps to it across callers too), and the quotas
// count what is admitted and not yet applied (quotaLedger).
func (m *Master) decideSubmissions(ctx context.Context, s *session, subs []submission, known *caller) ([]answer, error) {
	answers := make([]answer, len(subs))
	callers := make([]*caller, len(subs))
	var valid []int // the submissions that passed the checks
	for i := range subs {
		sub := &subs[i]
		c, refusal := m.submitter(sub.Secret, known)
		if refusal != nil {
			answers[i] = *refusal
			continue
		}
		callers[i] = c
		if err := m.checkFits(s, sub.ID, sub.Spec); err != nil {
			answers[i] = errorAnswer(http.StatusBadRequest, err.Error())
			continue
		}
		valid = append(valid, i)
	}
	for committed := false; len(valid) > 0; committed = true {
		n, w := 0, 0
		for n < len(valid) && (n == 0 || w+subtasksOf(subs[valid[n]].Spec) <= maxEntryWeight) {
			w += subtasksOf(subs[valid[n]].Spec)
			n++
		}
		if err := m.proposeSubmissions(ctx, s, subs, valid[:n], w, callers, answers); err != nil {
			if committed && !retryable(err) {
				err = fmt.Errorf("%w: %w", errPartlyDecided, err)
			}
			return nil, err
		}
		valid = valid[n:]
	}
	return answers, nil
}

// errPartlyDecided: some submissions of a batch were committed, the rest
// were not; the batch is decided again (retryable).
var errPartlyDecided = errors.New("part of the submissions were committed")

// proposeSubmissions checks the quotas of the submissions subs[at...]
// (weight subtasks in all) and proposes those within them in one entry,
// writing each one's answer.
func (m *Master) proposeSubmissions(ctx context.Context, s *session, subs []submission, at []int, weight int, callers []*caller, answers []answer) error {
	proposed, release := m.admitQuota(subs, at, func(i int, err error) {
		answers[i] = errorAnswer(http.StatusTooManyRequests, err.Error())
	})
	if len(proposed) == 0 {
		release()
		return nil
	}
	cmds := make([]fsm.Command, len(proposed))
	for k, i := range proposed {
		cmds[k] = &fsm.SubmitJob{Fenced: s.fenced(), ID: subs[i].ID, Spec: subs[i].Spec}
	}
	// What the quota admitted stays counted until the entry has applied
	// or failed, even if this caller stops waiting for it.
	rs, _, err := m.prop.ProposeSubmissions(ctx, weight, release, cmds...)
	if err != nil {
		return err
	}
	for k, res := range rs {
		i := proposed[k]
		sub := &subs[i]
		switch {
		case errors.Is(res.Err, fsm.ErrStaleToken):
			return res.Err // a newer leader: every submission goes to it
		case errors.Is(res.Err, fsm.ErrConflict):
			msg := fmt.Sprintf("job %q already exists with a different spec (%s): a job's spec never changes; cancel it and submit the new spec under another id, or with none to have one chosen", sub.ID, res.Status)
			if res.Status.Terminal() {
				msg = fmt.Sprintf("job %q exists with a different spec: it ended (%s), and its id is free again once it is forgotten, --job-retention (%s) after it ended", sub.ID, res.Status, m.cfg.JobRetention)
				if m.cfg.JobRetention == 0 {
					msg = fmt.Sprintf("job %q exists with a different spec: it ended (%s), and is kept for good (--job-retention 0): choose another id", sub.ID, res.Status)
				}
			}
			answers[i] = errorAnswer(http.StatusConflict, msg)
		case res.Err != nil:
			answers[i] = errorAnswer(http.StatusInternalServerError, res.Err.Error())
		case res.Created || sub.Generated:
			if res.Created {
				m.auditAs(callers[i], "job submit", "job", sub.ID, "subtasks", subtasksOf(sub.Spec))
			}
			a := jsonAnswer(http.StatusCreated, api.SubmitResponse{ID: sub.ID})
			a.Location = "/v1/jobs/" + sub.ID
			answers[i] = a
		default:
			answers[i] = jsonAnswer(http.StatusOK, api.SubmitResponse{ID: sub.ID})
		}
	}
	return nil
}

// submitter is who submits with secret, on the leader: known when this
// master checked the token already, else the token the leader's state
// knows by that secret. With ACLs on, a secret it does not know is a 401
// and one whose policy may not submit a 403 (refusal).
func (m *Master) submitter(secret string, known *caller) (c *caller, refusal *answer) {
	if !m.cfg.ACL {
		return nil, nil
	}
	if known != nil && !known.unverified {
		return known, nil
	}
	need := acl.Needs(http.MethodPut, "/v1/jobs/{id}")
	var t fsm.ACLToken
	ok := false
	if secret != "" && len(secret) <= maxSecretBytes {
		t, ok = m.lookupToken(secretHash(secret))
	}
	switch {
	case !ok:
		a := errorAnswer(http.StatusUnauthorized, "ACL token not found: it was deleted, or never created")
		return nil, &a
	case !t.Policy.Satisfies(need):
		a := errorAnswer(http.StatusForbidden, fmt.Sprintf("permission denied: token %s (policy %s) may not submit a job: it needs %s",
			tokenName(t), t.Policy, acl.Describe(need)))
		return nil, &a
	}
	return &caller{token: t, need: need}, nil
}
