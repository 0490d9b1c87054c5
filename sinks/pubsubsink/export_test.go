package pubsubsink

import "testing"

// PstestTopic starts a pstest server for the test, creates topic id on it, and returns the server's address
// and a function listing the data of every message it accepted: the end-to-end test lives in package
// pubsubsink_test, since the instance it starts imports this package.
func PstestTopic(t testing.TB, id string) (addr string, messages func() [][]byte) {
	f := newFake(t)
	f.topic(t, id)
	return f.srv.Addr, func() [][]byte {
		var out [][]byte
		for _, m := range f.srv.Messages() {
			out = append(out, m.Data)
		}
		return out
	}
}

// Project is the project of PstestTopic's topics.
const Project = project
