package sqssink

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/Admiral-Piett/goaws/app/models"
	"github.com/Admiral-Piett/goaws/app/servertest"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/sirupsen/logrus"

	"github.com/ankusa-go/ankusa/test/leak"
)

// goawsURL is the SQS stand-in of this test process. goaws keeps its queues in package state, so the process
// runs one server, tests name their queues uniquely, and no SQS test runs in parallel with another.
var goawsURL string

func TestMain(m *testing.M) {
	// goaws logs every message body at info level through logrus's global logger.
	logrus.SetOutput(io.Discard)
	// A fixed port, not :0: goaws writes the port it was given into every queue URL.
	port, err := freePort()
	if err != nil {
		fmt.Fprintln(os.Stderr, "cannot pick a port for goaws:", err)
		os.Exit(1)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	srv, err := servertest.New(addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cannot start goaws:", err)
		os.Exit(1)
	}
	goawsURL = "http://" + addr
	// Deduplicate FIFO sends by MessageDeduplicationId, as SQS does (goaws leaves it off by default).
	models.CurrentEnvironment.EnableDuplicates = true
	code := m.Run()
	_ = srv.Quit()
	os.Exit(leak.Check(code))
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Consumer is a plain SQS client on goaws: it creates the queues (the sink never does) and reads what the
// sink sent, as a consuming program would.
type Consumer struct {
	c  *sqs.Client
	tr *http.Transport
}

// NewConsumer returns a consumer whose connections are closed when t ends.
func NewConsumer(t testing.TB) *Consumer {
	tr := &http.Transport{MaxIdleConnsPerHost: 4}
	t.Cleanup(tr.CloseIdleConnections)
	return &Consumer{tr: tr, c: sqs.New(sqs.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(goawsURL),
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		HTTPClient:   &http.Client{Transport: tr},
		Retryer:      aws.NopRetryer{},
	})}
}

// GoawsURL is the endpoint of this process's goaws.
func GoawsURL() string { return goawsURL }

// CreateQueue creates a queue named name+"-"+<unique suffix> (".fifo" kept last) and returns its URL.
func (c *Consumer) CreateQueue(t testing.TB, name string, attrs map[string]string) string {
	t.Helper()
	suffix := ""
	if n := len(name); n > 5 && name[n-5:] == ".fifo" {
		name, suffix = name[:n-5], ".fifo"
	}
	name += "-" + strconv.FormatInt(time.Now().UnixNano(), 36) + suffix
	out, err := c.c.CreateQueue(context.Background(), &sqs.CreateQueueInput{QueueName: &name, Attributes: attrs})
	if err != nil {
		t.Fatalf("create queue %s: %v", name, err)
	}
	return aws.ToString(out.QueueUrl)
}

// Drain receives and deletes every visible message of queue.
func (c *Consumer) Drain(t testing.TB, queue string) []types.Message {
	t.Helper()
	var all []types.Message
	for {
		out, err := c.c.ReceiveMessage(context.Background(), &sqs.ReceiveMessageInput{
			QueueUrl: &queue, MaxNumberOfMessages: 10, WaitTimeSeconds: 0,
			MessageAttributeNames: []string{"All"}, MessageSystemAttributeNames: []types.MessageSystemAttributeName{"All"},
		})
		if err != nil {
			t.Fatalf("receive from %s: %v", queue, err)
		}
		if len(out.Messages) == 0 {
			return all
		}
		for _, m := range out.Messages {
			if _, err := c.c.DeleteMessage(context.Background(), &sqs.DeleteMessageInput{QueueUrl: &queue, ReceiptHandle: m.ReceiptHandle}); err != nil {
				t.Fatalf("delete from %s: %v", queue, err)
			}
		}
		all = append(all, out.Messages...)
	}
}

// Held returns the bodies queue holds, received or not, read from goaws's own state. The conformance suite
// reads through it: a ReceiveMessage whose response the SDK loses (aws-sdk-go-v2 #2737, a connection closed
// by the transport's write loop while the response is read, seen here under load) leaves the message
// received, and goaws's test server never makes it visible again.
func Held(queue string) []string {
	models.SyncQueues.RLock()
	defer models.SyncQueues.RUnlock()
	var out []string
	for name, q := range models.SyncQueues.Queues {
		if strings.HasSuffix(queue, "/"+name) {
			for _, m := range q.Messages {
				out = append(out, m.MessageBody)
			}
		}
	}
	return out
}

// Purge empties queue.
func (c *Consumer) Purge(t testing.TB, queue string) {
	t.Helper()
	if _, err := c.c.PurgeQueue(context.Background(), &sqs.PurgeQueueInput{QueueUrl: &queue}); err != nil {
		t.Fatalf("purge %s: %v", queue, err)
	}
}
