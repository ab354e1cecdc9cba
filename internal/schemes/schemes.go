// Package schemes maps URL schemes to openers, for the two kinds of
// plug-in stateseal opens by URL: KEK backends and keyset stores.
package schemes

import (
	"sort"
	"sync"
)

// A Map maps schemes to openers of type O. The zero value is empty and
// ready; it is safe for concurrent use.
type Map[O any] struct {
	mu      sync.RWMutex
	openers map[string]O
}

// Register makes scheme open with o. It panics if the scheme is taken: two
// plug-ins claiming one scheme is a build mistake. kind names the plug-in
// in the panic.
func (m *Map[O]) Register(kind, scheme string, o O) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.openers == nil {
		m.openers = map[string]O{}
	}
	if _, dup := m.openers[scheme]; dup {
		panic(kind + ": scheme " + scheme + " registered twice")
	}
	m.openers[scheme] = o
}

// Lookup returns the opener of scheme.
func (m *Map[O]) Lookup(scheme string) (O, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	o, ok := m.openers[scheme]
	return o, ok
}

// Schemes lists the registered schemes, sorted.
func (m *Map[O]) Schemes() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var s []string
	for k := range m.openers {
		s = append(s, k)
	}
	sort.Strings(s)
	return s
}
