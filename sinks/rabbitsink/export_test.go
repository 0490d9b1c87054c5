package rabbitsink

// What the end-to-end tests (package rabbitsink_test, which may import the instance) use of this package's
// test helpers.
var NewBroker = newBroker

func (b *broker) URL() string      { return b.url }
func (b *broker) Exchange() string { return b.exchange }
func (b *broker) DeclareQueue()    { b.declareQueue() }
func (b *broker) DeleteQueue()     { b.deleteQueue() }

// Payloads is every message body of hook id the queue held so far (broker.deliveries).
func (b *broker) Payloads(id string) ([][]byte, error) { return b.payloads(id), nil }
