package kafkasink

// What the end-to-end tests (package kafkasink_test, which may import the instance) use of this package's
// test helpers.
var (
	NewCluster  = newCluster
	NewConsumer = newConsumer
)

// TestTopic is the topic NewCluster seeds.
const TestTopic = testTopic

// Bodies is consumer.bodies.
func (c *consumer) Bodies(id string) ([][]byte, error) { return c.bodies(id) }
