package proxy

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/toolgate/toolgate/lifecycle"
	"github.com/toolgate/toolgate/pending"
	"github.com/toolgate/toolgate/policy"
)

// answer is how one request ends, whatever its protocol: every path of a
// call returns one, and (*Server).respond renders it, once, through the
// responder the call's protocol picked. Statuses are chosen where answers
// are built (the constructors below, and those of sessions and tasks),
// never by a responder.
type answer struct {
	kind    answerKind
	status  int
	outcome string // X-Toolgate-Decision, and the problem's "decision"
	title   string
	detail  string
	// logDetail, when set, is what toolgate's own log says instead of
	// detail: detail may quote an argument's value back to the agent
	// that sent it, which the log must not keep (policy.LogSafe).
	logDetail string
	callID    string // "" is the request's own call ID
	reasons   []string
	ruleIDs   []string
	// rpcCode is the JSON-RPC error code a refusal of a JSON-RPC message
	// carries; zero picks the outcome's.
	rpcCode int
	// call is the parked call a waiting answer is about.
	call pending.Call
	// result is the tool's own answer (kind result).
	result pending.Result
	// doc is the JSON document a document answer carries.
	doc any
	// statusURL, when set, is where the agent follows the parked call the
	// answer is about: a waiting answer carries it in its body, any other
	// ends its detail with it. respond makes it absolute when the proxy
	// knows how agents reach it (Config.ProxyPublicURL).
	statusURL string
	// allow is the Allow header of a 405; retryAfter the Retry-After of
	// a 429 or a 503.
	allow, retryAfter string
}

type answerKind int

const (
	// refusal: toolgate answers the request itself, before or instead of
	// any verdict (bad request, no credentials, unavailable, upstream
	// failed). A JSON-RPC message gets a JSON-RPC error where it can.
	refusal answerKind = iota
	// verdict: the policy or an approver said no, or the call ended
	// without a result. A tool call gets a tool result the model can
	// read and re-plan from.
	verdict
	// waiting: the call is parked and still waits (202).
	waiting
	// result: the tool's answer, handed over as it came.
	result
	// document: a JSON document about a call (its status).
	document
	// written: the answer is already on its way (a forwarded call), or
	// nobody is left to answer.
	written
)

// Outcome labels of problem bodies and of X-Toolgate-Decision.
const (
	outcomeDeny            = "deny"
	outcomeAsk             = "ask"
	outcomeAllow           = "allow"
	outcomeInvalid         = "invalid"
	outcomeUnauthenticated = "unauthenticated"
	outcomeUnavailable     = "unavailable"
	outcomeRejected        = "rejected"
	outcomeExpired         = "expired"
	outcomeCancelled       = "cancelled"
	outcomeApproved        = "approved"
)

var answered = answer{kind: written}

// invalid refuses a request toolgate cannot decide on as sent.
func invalid(status int, title, detail string) *answer {
	return &answer{kind: refusal, status: status, outcome: outcomeInvalid, title: title, detail: detail}
}

// badArgument refuses a call for err, an argument check's error: its
// message is the agent's, its log-safe form the log's.
func badArgument(title string, err error) *answer {
	a := invalid(http.StatusBadRequest, title, err.Error())
	a.logDetail = policy.LogSafe(err)
	return a
}

// rpcBadArgument is badArgument for a JSON-RPC message: invalid params.
func rpcBadArgument(title string, err error) *answer {
	a := badArgument(title, err)
	a.rpcCode = rpcInvalidParams
	return a
}

// rpcInvalid refuses a JSON-RPC message with the given error code.
func rpcInvalid(status, code int, title, detail string) *answer {
	a := invalid(status, title, detail)
	a.rpcCode = code
	return a
}

func unauthenticated(detail string) answer {
	return answer{kind: refusal, status: http.StatusUnauthorized, outcome: outcomeUnauthenticated, title: "Unauthenticated", detail: detail}
}

// storeRetryAfter is the Retry-After of a 503 for a store that did not
// answer: its sockets' timeouts are 2 s, and the sweeper backs off from 1 s.
const storeRetryAfter = "5"

func unavailable(title, detail string) answer {
	return answer{kind: refusal, status: http.StatusServiceUnavailable, outcome: outcomeUnavailable, title: title, detail: detail}
}

// storeUnavailable is unavailable for a store that did not answer: worth
// another try after storeRetryAfter, as a parked call's.
func storeUnavailable(title, detail string) answer {
	a := unavailable(title, detail)
	a.retryAfter = storeRetryAfter
	return a
}

// denied is the policy's deny.
func denied(d policy.Decision) answer {
	return answer{
		kind: verdict, status: http.StatusForbidden, outcome: outcomeDeny,
		title: "Denied by policy", detail: reasonsText(d.Messages()), reasons: d.Messages(), ruleIDs: d.RuleIDs(),
	}
}

// askUnavailable answers an ask on a toolgate that parks nothing.
func askUnavailable(d policy.Decision) answer {
	return answer{
		kind: verdict, status: http.StatusServiceUnavailable, outcome: outcomeAsk, title: "Approval not available",
		detail:  "the policy asks for approval (" + reasonsText(d.Messages()) + "), but approvals are not configured on this toolgate; nothing was forwarded",
		reasons: d.Messages(), ruleIDs: d.RuleIDs(),
	}
}

// policyFailed is the deny a call gets when the policy could not decide.
func policyFailed(callID string) policy.Decision {
	return policy.Decision{Action: policy.Deny, Reasons: []policy.Reason{{
		ID: "toolgate.policy_error", Message: "policy error (see toolgate's log for call " + callID + ")",
	}}}
}

// upstreamFailed classifies an error of an allowed call's upstream: 504
// for a timeout, 502 otherwise, nothing when the agent went away.
func upstreamFailed(ctx context.Context, err error) answer {
	if errors.Is(ctx.Err(), context.Canceled) {
		return answered // the agent went away; there is nobody to answer
	}
	// The detail never carries the error's text: it would tell the agent
	// the upstream's address, and Go's words for what went wrong.
	a := answer{
		kind: refusal, status: http.StatusBadGateway, outcome: outcomeAllow, title: "Upstream unreachable",
		detail: "the call was allowed, but the upstream could not be reached or did not answer",
	}
	switch {
	case errors.Is(err, errSwitched):
		a.title, a.detail = "Upstream switched protocols", "the upstream answered 101 Switching Protocols; toolgate does not tunnel"
	case errors.Is(err, errListTooLarge):
		a.title, a.detail = "Upstream answer too large", "the list answer is larger than toolgate reads to filter it"
	case errors.As(err, new(listErr)):
		a.title, a.detail = "Upstream answer unreadable", "the upstream answered, but not in a form toolgate can read to filter it for the caller"
	case errors.Is(err, errSessionTaken):
		// Not whose session it is: the answer was withheld for that.
		a.title, a.detail = "Upstream session refused", "the upstream answered with an MCP session that cannot be yours (another caller's, or malformed), so its answer was not passed on"
	case timedOut(err):
		a.status, a.title, a.detail = http.StatusGatewayTimeout, "Upstream timed out", "the call was allowed, but the upstream did not answer in time"
	}
	return a
}

// timedOut reports whether err is a deadline's or a socket's timeout: the
// store did not answer, rather than answered no.
func timedOut(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// storeFailed classifies an error of the approval store outside a hold
// (the status endpoint).
func storeFailed(err error) answer {
	if errors.Is(err, pending.ErrNotFound) {
		return *invalid(http.StatusNotFound, "Unknown call", "no call with this ID is yours")
	}
	if errors.Is(err, pending.ErrDamaged) {
		a := unavailable("Parked call unreadable", "the approval store holds this call in a form toolgate cannot read; it will not run")
		a.status = http.StatusInternalServerError
		return a
	}
	return storeUnavailable("Approval store unavailable", "the approval store could not be reached; retry later")
}

// outcomeAnswer is what the request that asked learns of its parked call:
// the one place a lifecycle.Outcome becomes an answer, but for the answer
// that creates an MCP task (taskCreated, extTaskCreated).
func outcomeAnswer(o lifecycle.Outcome, d policy.Decision) answer {
	pc := o.Call
	a := answer{callID: pc.ID, reasons: d.Messages(), ruleIDs: d.RuleIDs()}
	switch o.Kind {
	case lifecycle.Waiting:
		a.kind, a.status, a.outcome, a.call = waiting, http.StatusAccepted, outcomeAsk, pc
		a.statusURL = statusURL(pc.ID)
	case lifecycle.Ended:
		return ended(pc, d)
	case lifecycle.Delivered:
		a.kind, a.status, a.outcome, a.result = result, o.Result.Status, outcomeApproved, o.Result
	case lifecycle.Taken:
		a.kind, a.status, a.outcome, a.title = verdict, http.StatusConflict, string(pc.State), "Result already delivered"
		a.detail = "the result of call " + pc.ID + " was already delivered to another request"
		if pc.State == pending.Rejected || pc.State == pending.Expired {
			a.title = "Outcome already delivered"
			a.detail = "call " + pc.ID + " ended " + string(pc.State) + " and another request was told"
		}
		a.statusURL = statusURL(pc.ID)
		a.reasons, a.ruleIDs = nil, nil
	case lifecycle.NoResult:
		a.kind, a.status, a.outcome, a.title = verdict, http.StatusGatewayTimeout, string(pc.State), "No result"
		a.detail = "call " + pc.ID + " ended " + string(pc.State) + " without a result; it was not retried"
		a.reasons, a.ruleIDs = nil, nil
	case lifecycle.KeyReused:
		return answer{
			kind: refusal, status: http.StatusConflict, outcome: outcomeInvalid, callID: pc.ID,
			title: "Another call is parked under this call's key",
			detail: "the parked call " + pc.ID + " this call finds (by its Idempotency-Key, or else as identical) has another tool, other arguments (or, for MCP, other params) or other headers; " +
				"this call was not parked: send it with an Idempotency-Key of its own",
		}
	case lifecycle.NotParked:
		a.kind, a.status, a.outcome, a.title = refusal, http.StatusServiceUnavailable, outcomeUnavailable, "Approval store unavailable"
		a.detail = "the call needs approval but could not be parked; nothing was forwarded, retry later"
		a.retryAfter = storeRetryAfter
	case lifecycle.StoreFailed:
		a = unavailable("Approval store unavailable", "the approval store could not be reached; the call is not lost, follow its status URL")
		a.callID, a.retryAfter = pc.ID, storeRetryAfter
	case lifecycle.Lost:
		a = unavailable("Parked call lost", "the approval store no longer knows this call; nothing was forwarded")
		a.callID = pc.ID
		if pc.State == pending.Approved || pc.State == pending.Executing {
			// Last seen approved or running: an executor, here or on
			// another replica, may have sent it before the store lost it.
			// A verdict on the call, as NoResult is: an MCP tool call
			// gets it as a tool error, not a transport failure.
			a.kind, a.status, a.outcome, a.title = verdict, http.StatusGatewayTimeout, string(pending.Unknown), "Outcome unknown"
			a.detail = "the approval store lost call " + pc.ID + " after it was " + string(pc.State) +
				": the tool may have run it; it was not retried, check before you send it again"
		}
	case lifecycle.TooMany:
		a := answer{
			kind: refusal, status: http.StatusTooManyRequests, outcome: outcomeAsk, callID: pc.ID, retryAfter: "30",
			title:   "Too many parked calls",
			detail:  "the call needs approval, but too many calls of yours (or of everyone) already wait for one; nothing was parked or forwarded, retry later",
			reasons: d.Messages(), ruleIDs: d.RuleIDs(),
		}
		if re := (*pending.RateError)(nil); errors.As(o.Err, &re) {
			// Whole seconds, rounded up: a retry at Retry-After is let in.
			a.retryAfter = strconv.FormatInt(int64((re.RetryAfter+time.Second-1)/time.Second), 10)
			a.detail = "the call needs approval, but you asked for approvals too often; nothing was parked or forwarded, retry after the time given"
		}
		return a
	case lifecycle.Gone:
		return answered
	}
	return a
}

// ended answers a rejected, expired or cancelled call like a deny, with the
// reasons of the ask.
func ended(pc pending.Call, d policy.Decision) answer {
	a := answer{
		kind: verdict, status: http.StatusForbidden, callID: pc.ID, reasons: d.Messages(), ruleIDs: d.RuleIDs(),
		outcome: outcomeRejected, title: "Rejected by approver", detail: "the approver rejected the call",
	}
	switch pc.State {
	case pending.Expired:
		a.outcome, a.title, a.detail = outcomeExpired, "Approval expired", "nobody approved the call before it expired"
	case pending.Cancelled:
		a.outcome, a.title, a.detail = outcomeCancelled, "Call cancelled", "the call was cancelled before it was decided"
	default:
		if pc.DecidedBy != "" {
			a.detail = "rejected by " + pc.DecidedBy
		}
		if pc.Comment != "" {
			a.detail += ": " + pc.Comment
		}
	}
	return a
}

// pendingText is what a held MCP tool call still waiting learns; status
// is the call's status URL.
func pendingText(pc pending.Call, status string) string {
	return "Approval pending: call " + pc.ID + " is waiting for a human approver (status: " + status +
		", expires " + pc.ExpiresAt.UTC().Format(time.RFC3339) + "). Nothing ran yet. Retry this same call later: " +
		"once it is approved the retry returns the tool's result."
}
