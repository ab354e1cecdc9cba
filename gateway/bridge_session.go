package gateway

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/stateseal/stateseal/seal"
)

// A bridged session is everything an instance must know to serve a
// request of it, sealed into its id: no instance keeps sessions.
type session struct {
	Version string         `json:"v"`           // the negotiated protocol version
	Caps    jsontext.Value `json:"c"`           // the client's declared capabilities
	Info    jsontext.Value `json:"i,omitempty"` // the client's clientInfo
	Nonce   string         `json:"n"`           // makes each id unique: cancellations and answers are scoped by it

	principal string
}

// sessionMethod binds a session id: no MCP method, so a session id never
// opens as a requestState, nor a requestState as a session id.
const sessionMethod = "sealgate/session"

// maxSessionInfo bounds the capabilities and clientInfo a session id
// carries: it travels in a header on every request.
const maxSessionInfo = 4096

var (
	errNoSession     = errors.New("gateway: no Mcp-Session-Id: initialize first")
	errSessionGone   = errors.New("gateway: session not found: it expired, is not this server's, or belongs to another principal; initialize again")
	errSessionTooBig = errors.New("gateway: the client's capabilities and clientInfo are too large to carry in a session")
)

func (b *Bridge) sessionBinding(principal string) seal.Binding {
	return seal.Binding{Method: sessionMethod, Principal: principal, Audience: b.Audience}
}

// newSession seals s into a session id for principal.
func (b *Bridge) newSession(sl *seal.Sealer, s *session, principal string) (string, error) {
	if len(s.Caps)+len(s.Info) > maxSessionInfo {
		return "", errSessionTooBig
	}
	var n [16]byte
	rand.Read(n[:])
	s.Nonce = hex.EncodeToString(n[:])
	plain, err := json.Marshal(s)
	if err != nil {
		return "", err
	}
	return sl.Seal(b.sessionBinding(principal), plain, b.SessionTTL)
}

// session opens r's session id for the principal r carries now. Any
// failure is errNoSession or errSessionGone: a client is told no more.
func (b *Bridge) session(sl *seal.Sealer, r *http.Request, principal string) (*session, error) {
	ids := r.Header.Values(headerSession)
	if len(ids) == 0 {
		return nil, errNoSession
	}
	if len(ids) > 1 {
		return nil, errSessionGone
	}
	plain, err := sl.Open(b.sessionBinding(principal), ids[0])
	if err != nil {
		return nil, errSessionGone
	}
	var s session
	if err := json.Unmarshal(plain, &s); err != nil || s.Nonce == "" {
		return nil, errSessionGone
	}
	s.principal = principal
	return &s, nil
}
