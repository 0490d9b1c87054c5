package kafkasink

// What the end-to-end tests (package kafkasink_test, which may import the instance) use of this package's
// test helpers.
var (
	NewCluster  = newCluster
	NewConsumer = newConsumer
)

// TestTopic is the topic NewCluster seeds.
const TestTopic = testTopic

// Payloads is every record value of hook id in the topic (consumer.records).
func (c *consumer) Payloads(id string) ([][]byte, error) { return c.payloads(id), nil }
