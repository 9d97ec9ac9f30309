// Command kafluss-go-producer drives a Go Kafka client through a plan of cases written by the Rust
// suite: the same plan and output format as tests/clients/produce.py (one JSON line per case on
// stdout).
//
// Usage: kafluss-go-producer -client franz-go|sarama PLAN.json, or -version; or
// kafluss-go-producer -client franz-go -bench BOOTSTRAP TOPIC VALUES (the bench's stock-client mode);
// or kafluss-go-producer -client franz-go -exactly-once BOOTSTRAP TOPIC PARTITIONS COUNT (the
// exactly-once tests' producer).
//
// Every wait is bounded. A plan with "idempotent": false turns idempotence off explicitly
// (kgo.DisableIdempotentWrite(), franz-go's default is on; sarama's Producer.Idempotent=false, its
// default). With "idempotent": true franz-go runs with its default (idempotent) and sarama is asked
// for it (Producer.Idempotent=true with the settings sarama requires for it: acks=all, one request
// in flight per connection).
package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// Bounds for one case (as produce.py).
const (
	deliveryTimeout = 20 * time.Second
	metadataTimeout = 10 * time.Second
	// A case that must fail (unknown topic, wrong password) gives up sooner.
	expectedFailureTimeout = 5 * time.Second
)

type saslUser struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

type record struct {
	Key       *[]byte      `json:"key"`
	Value     *[]byte      `json:"value"`
	Headers   [][2]*string `json:"headers"`
	Timestamp *int64       `json:"timestamp"`
	Partition *int32       `json:"partition"`
}

type testCase struct {
	Name        string   `json:"name"`
	Kind        string   `json:"kind"`
	Topic       string   `json:"topic"`
	Partitions  int      `json:"partitions"`
	Compression string   `json:"compression"`
	Acks        int      `json:"acks"`
	Records     []record `json:"records"`
	ExpectError bool     `json:"expect_error"`
}

type plan struct {
	Bootstrap  string     `json:"bootstrap"`
	Idempotent bool       `json:"idempotent"`
	Sasl       *saslUser  `json:"sasl"`
	Cases      []testCase `json:"cases"`
}

type outcome struct {
	Case       string   `json:"case"`
	Ok         bool     `json:"ok"`
	Detail     string   `json:"detail"`
	Offsets    []*int64 `json:"offsets"`
	StartedMs  int64    `json:"started_ms"`
	FinishedMs int64    `json:"finished_ms"`
}

// header is one decoded record header (a nil value is a null header value).
type header struct {
	key   string
	value []byte
}

// decoded is one record with its bytes decoded from base64.
type decoded struct {
	key, value []byte
	headers    []header
	timestamp  *int64
	partition  *int32
}

func decodeRecords(c testCase) ([]decoded, error) {
	out := make([]decoded, 0, len(c.Records))
	for _, r := range c.Records {
		d := decoded{timestamp: r.Timestamp, partition: r.Partition}
		if r.Key != nil {
			d.key = *r.Key
		}
		if r.Value != nil {
			d.value = *r.Value
		}
		for _, h := range r.Headers {
			if h[0] == nil {
				return nil, errors.New("a header without a name")
			}
			var value []byte
			if h[1] != nil {
				bytes, err := decodeBase64(*h[1])
				if err != nil {
					return nil, err
				}
				value = bytes
			}
			d.headers = append(d.headers, header{key: *h[0], value: value})
		}
		out = append(out, d)
	}
	return out, nil
}

// recentLog keeps a client's first and last log lines (why it failed first, how it ended), for
// the detail of a failed case.
type recentLog struct {
	mu      sync.Mutex
	lines   []string
	dropped int
}

const logFirst, logLast = 5, 5

func (l *recentLog) add(line string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(line) > 300 {
		line = line[:300]
	}
	l.lines = append(l.lines, line)
	if len(l.lines) > logFirst+logLast {
		l.lines = append(l.lines[:logFirst], l.lines[logFirst+1:]...)
		l.dropped++
	}
}

func (l *recentLog) Write(p []byte) (int, error) {
	l.add(strings.TrimSpace(string(p)))
	return len(p), nil
}

func (l *recentLog) text() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.lines) == 0 {
		return ""
	}
	lines := l.lines
	if l.dropped > 0 {
		lines = append(append(append([]string{}, l.lines[:logFirst]...),
			fmt.Sprintf("... (%d lines left out)", l.dropped)), l.lines[logFirst:]...)
	}
	return "\nclient log:\n" + strings.Join(lines, "\n")
}

func (l *recentLog) clear() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = nil
}

var clientLog = &recentLog{}

// A driver: metadata returns the topic's sorted partitions, produce the offsets it learnt.
type driver struct {
	metadata func(p plan, c testCase) ([]int32, error)
	produce  func(p plan, c testCase) ([]*int64, error)
}

var drivers = map[string]driver{
	"franz-go": {franzMetadata, franzProduce},
	"sarama":   {saramaMetadata, saramaProduce},
}

func caseTimeout(c testCase) time.Duration {
	if c.ExpectError {
		return expectedFailureTimeout
	}
	return deliveryTimeout
}

func offsetOrNil(offset int64) *int64 {
	if offset < 0 {
		return nil
	}
	return &offset
}

// ---------------------------------------------------------------- franz-go

func franzOptions(p plan, c *testCase) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(p.Bootstrap),
		kgo.ProducerLinger(5 * time.Millisecond),
		kgo.DialTimeout(5 * time.Second),
		kgo.RequestTimeoutOverhead(5 * time.Second),
		kgo.WithLogger(kgo.BasicLogger(clientLog, kgo.LogLevelWarn, nil)),
	}
	if !p.Idempotent {
		opts = append(opts, kgo.DisableIdempotentWrite())
	}
	if p.Sasl != nil {
		opts = append(opts, kgo.SASL(plain.Auth{User: p.Sasl.Username, Pass: p.Sasl.Password}.AsMechanism()))
	}
	if c != nil {
		timeout := caseTimeout(*c)
		// No kgo.RecordDeliveryTimeout: franz-go counts it from the first record's Timestamp, so
		// a record with an explicit CreateTime older than the timeout fails at once, unsent
		// ("records have timed out before they were able to be produced"). The context of
		// ProduceSync bounds the case instead.
		opts = append(opts,
			kgo.ProduceRequestTimeout(timeout/2),
			kgo.UnknownTopicRetries(2),
		)
		switch c.Acks {
		case 0:
			opts = append(opts, kgo.RequiredAcks(kgo.NoAck()))
		case 1:
			opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()))
		default:
			opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
		}
		for _, r := range c.Records {
			if r.Partition != nil {
				opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
				break
			}
		}
	}
	return opts
}

func franzCodec(name string) (kgo.CompressionCodec, error) {
	switch name {
	case "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.NoCompression(), fmt.Errorf("unknown compression %q", name)
}

func franzMetadata(p plan, c testCase) ([]int32, error) {
	client, err := kgo.NewClient(franzOptions(p, nil)...)
	if err != nil {
		return nil, err
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), metadataTimeout)
	defer cancel()

	one := kmsg.NewPtrMetadataRequest()
	topic := kmsg.NewMetadataRequestTopic()
	topic.Topic = kmsg.StringPtr(c.Topic)
	one.Topics = append(one.Topics, topic)
	answer, err := one.RequestWith(ctx, client)
	if err != nil {
		return nil, err
	}
	if len(answer.Topics) != 1 || answer.Topics[0].ErrorCode != 0 {
		return nil, fmt.Errorf("metadata for %s: %+v", c.Topic, answer.Topics)
	}
	var partitions []int32
	for _, partition := range answer.Topics[0].Partitions {
		partitions = append(partitions, partition.Partition)
	}
	sort.Slice(partitions, func(i, j int) bool { return partitions[i] < partitions[j] })

	every := kmsg.NewPtrMetadataRequest() // no topics: all of them
	all, err := every.RequestWith(ctx, client)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, t := range all.Topics {
		if t.Topic != nil {
			names = append(names, *t.Topic)
		}
	}
	for _, name := range names {
		if name == c.Topic {
			return partitions, nil
		}
	}
	return nil, fmt.Errorf("%s missing from all-topics metadata: %v", c.Topic, names)
}

func franzProduce(p plan, c testCase) ([]*int64, error) {
	codec, err := franzCodec(c.Compression)
	if err != nil {
		return nil, err
	}
	records, err := decodeRecords(c)
	if err != nil {
		return nil, err
	}
	client, err := kgo.NewClient(append(franzOptions(p, &c), kgo.ProducerBatchCompression(codec))...)
	if err != nil {
		return nil, err
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), caseTimeout(c)+5*time.Second)
	defer cancel()
	batch := make([]*kgo.Record, 0, len(records))
	for _, d := range records {
		r := &kgo.Record{Topic: c.Topic, Key: d.key, Value: d.value}
		for _, h := range d.headers {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: h.key, Value: h.value})
		}
		if d.timestamp != nil {
			r.Timestamp = time.UnixMilli(*d.timestamp)
		}
		if d.partition != nil {
			r.Partition = *d.partition
		}
		batch = append(batch, r)
	}
	results := client.ProduceSync(ctx, batch...)
	if err := results.FirstErr(); err != nil {
		return nil, err
	}
	offsets := make([]*int64, 0, len(results))
	for _, result := range results {
		if c.Acks == 0 {
			offsets = append(offsets, nil) // no answer, no offset
		} else {
			offsets = append(offsets, offsetOrNil(result.Record.Offset))
		}
	}
	return offsets, nil
}

// ---------------------------------------------------------------- sarama

func saramaConfig(p plan, c *testCase) (*sarama.Config, error) {
	config := sarama.NewConfig()
	config.ClientID = "kafluss-suite"
	config.Metadata.AllowAutoTopicCreation = false
	config.Metadata.Retry.Max = 3
	config.Metadata.Retry.Backoff = 250 * time.Millisecond
	config.Net.DialTimeout = 5 * time.Second
	config.Net.ReadTimeout = deliveryTimeout / 2
	config.Net.WriteTimeout = deliveryTimeout / 2
	// Off explicitly (sarama's default too), or asked for with what sarama requires for it.
	config.Producer.Idempotent = p.Idempotent
	if p.Idempotent {
		config.Net.MaxOpenRequests = 1
		config.Producer.RequiredAcks = sarama.WaitForAll
	}
	config.Producer.Return.Successes = true
	config.Producer.Return.Errors = true
	config.Producer.Flush.Frequency = 5 * time.Millisecond
	if p.Sasl != nil {
		config.Net.SASL.Enable = true
		config.Net.SASL.Mechanism = sarama.SASLTypePlaintext
		config.Net.SASL.User = p.Sasl.Username
		config.Net.SASL.Password = p.Sasl.Password
		config.Net.SASL.Handshake = true
	}
	if c != nil {
		timeout := caseTimeout(*c)
		config.Producer.Timeout = timeout / 2
		config.Producer.Retry.Max = 2
		if c.ExpectError {
			config.Net.ReadTimeout = timeout
			config.Metadata.Retry.Max = 2
		}
		switch c.Acks {
		case 0:
			config.Producer.RequiredAcks = sarama.NoResponse
		case 1:
			config.Producer.RequiredAcks = sarama.WaitForLocal
		default:
			config.Producer.RequiredAcks = sarama.WaitForAll
		}
		switch c.Compression {
		case "none":
			config.Producer.Compression = sarama.CompressionNone
		case "gzip":
			config.Producer.Compression = sarama.CompressionGZIP
		case "snappy":
			config.Producer.Compression = sarama.CompressionSnappy
		case "lz4":
			config.Producer.Compression = sarama.CompressionLZ4
		case "zstd":
			config.Producer.Compression = sarama.CompressionZSTD
		default:
			return nil, fmt.Errorf("unknown compression %q", c.Compression)
		}
		for _, r := range c.Records {
			if r.Partition != nil {
				config.Producer.Partitioner = sarama.NewManualPartitioner
				break
			}
		}
	}
	return config, config.Validate()
}

func saramaMetadata(p plan, c testCase) ([]int32, error) {
	config, err := saramaConfig(p, nil)
	if err != nil {
		return nil, err
	}
	client, err := sarama.NewClient([]string{p.Bootstrap}, config)
	if err != nil {
		return nil, err
	}
	defer client.Close()
	partitions, err := client.Partitions(c.Topic)
	if err != nil {
		return nil, fmt.Errorf("metadata for %s: %w", c.Topic, err)
	}
	sort.Slice(partitions, func(i, j int) bool { return partitions[i] < partitions[j] })
	if err := client.RefreshMetadata(); err != nil { // no topics: all of them
		return nil, err
	}
	every, err := client.Topics()
	if err != nil {
		return nil, err
	}
	for _, name := range every {
		if name == c.Topic {
			return partitions, nil
		}
	}
	return nil, fmt.Errorf("%s missing from all-topics metadata: %v", c.Topic, every)
}

func saramaProduce(p plan, c testCase) ([]*int64, error) {
	config, err := saramaConfig(p, &c)
	if err != nil {
		return nil, err
	}
	records, err := decodeRecords(c)
	if err != nil {
		return nil, err
	}
	type answer struct {
		offsets []*int64
		err     error
	}
	done := make(chan answer, 1)
	// sarama takes no context: the whole case runs in a goroutine bounded by a timer.
	go func() {
		producer, err := sarama.NewSyncProducer([]string{p.Bootstrap}, config)
		if err != nil {
			done <- answer{err: err}
			return
		}
		defer producer.Close()
		messages := make([]*sarama.ProducerMessage, 0, len(records))
		for _, d := range records {
			m := &sarama.ProducerMessage{Topic: c.Topic}
			if d.key != nil {
				m.Key = sarama.ByteEncoder(d.key)
			}
			if d.value != nil {
				m.Value = sarama.ByteEncoder(d.value)
			}
			for _, h := range d.headers {
				m.Headers = append(m.Headers, sarama.RecordHeader{Key: []byte(h.key), Value: h.value})
			}
			if d.timestamp != nil {
				m.Timestamp = time.UnixMilli(*d.timestamp)
			}
			if d.partition != nil {
				m.Partition = *d.partition
			}
			messages = append(messages, m)
		}
		if err := producer.SendMessages(messages); err != nil {
			var many sarama.ProducerErrors
			if errors.As(err, &many) && len(many) > 0 {
				err = fmt.Errorf("%d of %d not delivered, first: %w", len(many), len(messages), many[0].Err)
			}
			done <- answer{err: err}
			return
		}
		offsets := make([]*int64, 0, len(messages))
		for _, m := range messages {
			if c.Acks == 0 {
				offsets = append(offsets, nil) // no answer, no offset
			} else {
				offsets = append(offsets, offsetOrNil(m.Offset))
			}
		}
		done <- answer{offsets: offsets}
	}()
	select {
	case a := <-done:
		return a.offsets, a.err
	case <-time.After(caseTimeout(c) * 2):
		return nil, fmt.Errorf("sarama did not finish within %s", caseTimeout(c)*2)
	}
}

// ---------------------------------------------------------------- bench mode

// benchFranz is the bench's stock-client mode (bench/scenarios/stock_client.py): every line of
// the values file as one record value to topic, with the scenario's settings for every client
// (acks=1, 5 ms linger, batches of up to 500 records of 100 B, idempotence off); prints
// {"records": N} once every record is acknowledged, fails if any was not.
func benchFranz(bootstrap, topic, values string) error {
	file, err := os.Open(values)
	if err != nil {
		return err
	}
	defer file.Close()
	client, err := kgo.NewClient(
		kgo.SeedBrokers(bootstrap),
		kgo.DisableIdempotentWrite(),
		kgo.RequiredAcks(kgo.LeaderAck()),
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchMaxBytes(500*100),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.MaxBufferedRecords(1_000_000),
		kgo.RecordDeliveryTimeout(2*time.Minute),
		kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelWarn, nil)),
	)
	if err != nil {
		return err
	}
	defer client.Close()
	var failed sync.Map
	var wg sync.WaitGroup
	records := 0
	lines := bufio.NewScanner(file)
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	for lines.Scan() {
		value := append([]byte(nil), lines.Bytes()...)
		wg.Add(1)
		client.Produce(context.Background(), &kgo.Record{Topic: topic, Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.LoadOrStore("first", err)
			}
			wg.Done()
		})
		records++
	}
	if err := lines.Err(); err != nil {
		return err
	}
	wg.Wait()
	if first, any := failed.Load("first"); any {
		return fmt.Errorf("records failed, first: %w", first.(error))
	}
	fmt.Printf("{\"records\": %d}\n", records)
	return nil
}

// ---------------------------------------------------------------- exactly-once mode

// exactlyOnceFranz is the exactly-once tests' franz-go producer (tests/tests/exactly_once.rs):
// franz-go's default settings (idempotent, acks=all, retries without limit, no delivery timeout)
// but the manual partitioner the records' partitions need, one record per id 0..count-1, its
// value the id in decimal, to partition id % partitions of the id % n-th of the n
// comma-separated topics in topic (one, or both names of one table), paced at 10 records every
// 10 ms so the test's faults fall mid-run. Prints {"acked": [...], "failed": N, "errors": [...]}
// as the Java producer's --exactly-once does. The flush is bounded (180 s, as produce.py's);
// records left then are aborted and count as failed.
func exactlyOnceFranz(bootstrap, topic string, partitions, count int) error {
	client, err := kgo.NewClient(
		kgo.SeedBrokers(bootstrap),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelWarn, nil)),
	)
	if err != nil {
		return err
	}
	defer client.Close()
	var mu sync.Mutex
	acked := make([]int, 0, count)
	errs := make([]string, 0, 5)
	failed := 0
	var wg sync.WaitGroup
	topics := strings.Split(topic, ",")
	for id := 0; id < count; id++ {
		record := &kgo.Record{
			Topic:     topics[id%len(topics)],
			Partition: int32(id % partitions),
			Value:     []byte(strconv.Itoa(id)),
		}
		wg.Add(1)
		client.Produce(context.Background(), record, func(_ *kgo.Record, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				acked = append(acked, id)
				return
			}
			failed++
			if len(errs) < 5 {
				text := err.Error()
				if len(text) > 300 {
					text = text[:300]
				}
				errs = append(errs, text)
			}
		})
		if id%10 == 9 {
			time.Sleep(10 * time.Millisecond)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	if err := client.Flush(ctx); err != nil {
		mu.Lock()
		errs = append(errs, fmt.Sprintf("flush: %v", err))
		mu.Unlock()
		abort, cancelAbort := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancelAbort()
		_ = client.AbortBufferedRecords(abort) // fails what is left through its callbacks
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	return json.NewEncoder(os.Stdout).Encode(map[string]any{"acked": acked, "failed": failed, "errors": errs})
}

// ---------------------------------------------------------------- plan runner

func runCase(d driver, p plan, c testCase) outcome {
	clientLog.clear()
	result := outcome{Case: c.Name, Offsets: []*int64{}, StartedMs: time.Now().UnixMilli()}
	var err error
	switch c.Kind {
	case "metadata":
		var partitions []int32
		partitions, err = d.metadata(p, c)
		if err == nil {
			expected := make([]int32, c.Partitions)
			for i := range expected {
				expected[i] = int32(i)
			}
			result.Ok = fmt.Sprint(partitions) == fmt.Sprint(expected)
			result.Detail = fmt.Sprintf("partitions %v, expected %v", partitions, expected)
		}
	case "produce":
		var offsets []*int64
		offsets, err = d.produce(p, c)
		if err == nil {
			result.Offsets = offsets
			result.Ok = !c.ExpectError
			result.Detail = "delivered"
			if c.ExpectError {
				result.Detail = "delivered although an error was expected"
			}
		}
	default:
		result.Detail = fmt.Sprintf("unknown case kind %q", c.Kind)
	}
	if err != nil {
		// The client's first and last log lines (at most 11 of 300 bytes), then the error in
		// full, last (the suite quotes the end of a detail).
		text := fmt.Sprintf("%T: %v", err, err)
		if logged := clientLog.text(); logged != "" {
			text = strings.TrimPrefix(logged, "\n") + "\nerror: " + text
		}
		result.Ok = c.ExpectError
		result.Detail = text
		if !result.Ok {
			fmt.Fprintf(os.Stderr, "case %s: %s\n", c.Name, text)
		}
	}
	result.FinishedMs = time.Now().UnixMilli()
	return result
}

// version names the client modules this binary was built with (from its build information).
func version(client string) string {
	module := map[string]string{"franz-go": "github.com/twmb/franz-go", "sarama": "github.com/IBM/sarama"}[client]
	found := "unknown"
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == module {
				found = dep.Version
			}
		}
	}
	return fmt.Sprintf("%s %s, %s", client, found, runtime.Version())
}

func decodeBase64(text string) ([]byte, error) {
	return base64.StdEncoding.DecodeString(text)
}

func main() {
	client := flag.String("client", "", "franz-go or sarama")
	showVersion := flag.Bool("version", false, "print the client's version and exit")
	bench := flag.Bool("bench", false, "send every line of VALUES to TOPIC at BOOTSTRAP (franz-go only)")
	exactlyOnce := flag.Bool("exactly-once", false, "the exactly-once tests' producer (franz-go only)")
	flag.Parse()
	if *exactlyOnce {
		usage := "usage: kafluss-go-producer -client franz-go -exactly-once BOOTSTRAP TOPIC PARTITIONS COUNT"
		partitions, errPartitions := strconv.Atoi(flag.Arg(2))
		count, errCount := strconv.Atoi(flag.Arg(3))
		if *client != "franz-go" || flag.NArg() != 4 || errPartitions != nil || errCount != nil || partitions < 1 {
			fmt.Fprintln(os.Stderr, usage)
			os.Exit(2)
		}
		if err := exactlyOnceFranz(flag.Arg(0), flag.Arg(1), partitions, count); err != nil {
			log.Fatal(err)
		}
		return
	}
	if *bench {
		if *client != "franz-go" || flag.NArg() != 3 {
			fmt.Fprintln(os.Stderr, "usage: kafluss-go-producer -client franz-go -bench BOOTSTRAP TOPIC VALUES")
			os.Exit(2)
		}
		if err := benchFranz(flag.Arg(0), flag.Arg(1), flag.Arg(2)); err != nil {
			log.Fatal(err)
		}
		return
	}
	d, known := drivers[*client]
	if !known || (!*showVersion && flag.NArg() != 1) {
		fmt.Fprintln(os.Stderr, "usage: kafluss-go-producer -client franz-go|sarama (PLAN.json | -version)")
		os.Exit(2)
	}
	if *showVersion {
		fmt.Println(version(*client))
		return
	}
	sarama.Logger = log.New(clientLog, "sarama: ", 0)
	text, err := os.ReadFile(flag.Arg(0))
	if err != nil {
		log.Fatal(err)
	}
	var p plan
	if err := json.Unmarshal(text, &p); err != nil {
		log.Fatal(err)
	}
	out := json.NewEncoder(os.Stdout)
	for _, c := range p.Cases {
		if err := out.Encode(runCase(d, p, c)); err != nil {
			log.Fatal(err)
		}
	}
}
