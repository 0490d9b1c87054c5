package telemetry

import (
	"golang.org/x/sys/unix"

	"github.com/prometheus/client_golang/prometheus"
)

// diskCollector reads the filesystem that holds the data dir at scrape time: a sampled
// value could say a disk had room a minute after it filled. A statfs that fails (the dir
// not created yet, or gone) reports nothing rather than a made-up zero that would page.
type diskCollector struct {
	dir         string
	free, total *prometheus.Desc
}

func (c *diskCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.free; ch <- c.total }

func (c *diskCollector) Collect(ch chan<- prometheus.Metric) {
	var st unix.Statfs_t
	if err := unix.Statfs(c.dir, &st); err != nil {
		return
	}
	bs := float64(st.Bsize)
	// Bavail, not Bfree: the blocks reserved for root are not room the store can use
	// when it runs as an ordinary user.
	ch <- prometheus.MustNewConstMetric(c.free, prometheus.GaugeValue, float64(st.Bavail)*bs)
	ch <- prometheus.MustNewConstMetric(c.total, prometheus.GaugeValue, float64(st.Blocks)*bs)
}

// Disk exposes ankusa_disk_free_bytes and ankusa_disk_total_bytes for the filesystem
// holding dir (the node's data dir). Only an instance with a store calls it: under
// wal.type none there is no disk to watch.
func (t *Telemetry) Disk(dir string) {
	l := prometheus.Labels{"instance": t.Instance}
	t.Metrics.Registry.MustRegister(&diskCollector{
		dir: dir,
		free: prometheus.NewDesc("ankusa_disk_free_bytes",
			"Bytes free to an unprivileged writer on the filesystem holding the data dir.", nil, l),
		total: prometheus.NewDesc("ankusa_disk_total_bytes",
			"Size of the filesystem holding the data dir.", nil, l),
	})
}
