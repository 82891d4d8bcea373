package slackfake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// Socket Mode envelope types, as Slack names them.
const (
	EnvelopeEventsAPI    = "events_api"
	EnvelopeSlashCommand = "slash_commands"
	EnvelopeInteractive  = "interactive"
	EnvelopeDisconnect   = "disconnect"
)

// Ack is a Socket Mode acknowledgement the client sent.
type Ack struct {
	EnvelopeID string
	Payload    json.RawMessage // what the client answered with, if anything
}

// socketState is the Socket Mode side of the Server. stop is safe to use
// without the Server's lock; the rest is guarded by it.
type socketState struct {
	stop     chan struct{} // closed when the fake stops
	stopOnce sync.Once
	pending  [][]byte // queued frames, sent in order by the newest connection
	seq      int
	conns    int // connections opened so far; the newest is number conns
	acks     []Ack
}

func (st *socketState) init() { st.stop = make(chan struct{}) }

func (st *socketState) close() { st.stopOnce.Do(func() { close(st.stop) }) }

// Queue queues an envelope of type typ carrying payload (marshalled to
// JSON; a []byte or json.RawMessage is sent as it is) and returns its
// envelope id. It is sent after hello on the open connection, or on the
// next one.
func (s *Server) Queue(typ string, payload any) string {
	s.t.Helper()
	raw, ok := payload.([]byte)
	if r, isRaw := payload.(json.RawMessage); isRaw {
		raw, ok = r, true
	}
	if !ok {
		var err error
		if raw, err = json.Marshal(payload); err != nil {
			s.t.Fatalf("slackfake: envelope payload: %v", err)
		}
	}
	s.mu.Lock()
	s.socket.seq++
	id := fmt.Sprintf("env-%d", s.socket.seq)
	s.mu.Unlock()
	frame := map[string]any{"envelope_id": id, "type": typ, "payload": json.RawMessage(raw),
		"accepts_response_payload": typ != EnvelopeEventsAPI}
	if typ == EnvelopeDisconnect {
		frame = map[string]any{"type": typ, "reason": "refresh_requested"}
	}
	b, _ := json.Marshal(frame)
	s.mu.Lock()
	s.socket.pending = append(s.socket.pending, b)
	s.notifyLocked()
	s.mu.Unlock()
	return id
}

// Acks returns the acknowledgements received so far, in order.
func (s *Server) Acks() []Ack {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Ack(nil), s.socket.acks...)
}

// WaitAck waits for the ack of envelope id; the test fails after a
// timeout.
func (s *Server) WaitAck(id string) Ack {
	s.t.Helper()
	var found Ack
	s.waitFor("the ack of "+id, func() bool {
		for _, a := range s.Acks() {
			if a.EnvelopeID == id {
				found = a
				return true
			}
		}
		return false
	})
	return found
}

// Connections is how many Socket Mode connections were opened so far.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.socket.conns
}

// WaitConnections waits until n connections were opened.
func (s *Server) WaitConnections(n int) {
	s.t.Helper()
	s.waitFor(fmt.Sprintf("%d socket connections", n), func() bool { return s.Connections() >= n })
}

var upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

// serveSocket is one Socket Mode connection: hello, then the queued
// envelopes, pings every PingEvery, and every ack recorded. Only the
// newest connection takes queued envelopes, so none is written to a
// connection the client has left.
func (s *Server) serveSocket(w http.ResponseWriter, r *http.Request) {
	conn, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer conn.Close()
	s.mu.Lock()
	s.socket.conns++
	n := s.socket.conns
	s.notifyLocked()
	s.mu.Unlock()

	hello := map[string]any{"type": "hello", "num_connections": n,
		"connection_info": map[string]any{"app_id": "A0HERALD"},
		"debug_info":      map[string]any{"host": "slackfake", "approximate_connection_time": 18060}}
	if err := conn.WriteJSON(hello); err != nil {
		return
	}
	readerDone := make(chan struct{})
	go s.readAcks(conn, readerDone)
	ping := time.NewTicker(s.PingEvery)
	defer ping.Stop()
	// A first ping at once: the SDK counts from the last ping it saw.
	_ = conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(time.Second))
	for {
		s.mu.Lock()
		if s.socket.conns != n {
			s.mu.Unlock()
			return
		}
		frames, changed := s.socket.pending, s.changed
		s.socket.pending = nil
		s.mu.Unlock()
		for _, frame := range frames {
			if err := conn.WriteMessage(websocket.TextMessage, frame); err != nil {
				return
			}
		}
		select {
		case <-changed:
		case <-ping.C:
			_ = conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(time.Second))
		case <-readerDone:
			return
		case <-s.socket.stop:
			return
		}
	}
}

func (s *Server) readAcks(conn *websocket.Conn, done chan<- struct{}) {
	defer close(done)
	for {
		_, msg, err := conn.ReadMessage()
		if err != nil {
			return
		}
		var a struct {
			EnvelopeID string          `json:"envelope_id"`
			Payload    json.RawMessage `json:"payload"`
		}
		if json.Unmarshal(msg, &a) != nil || a.EnvelopeID == "" {
			continue
		}
		s.mu.Lock()
		s.socket.acks = append(s.socket.acks, Ack{EnvelopeID: a.EnvelopeID, Payload: a.Payload})
		s.notifyLocked()
		s.mu.Unlock()
	}
}
