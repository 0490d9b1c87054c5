package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/ankusa-go/ankusa/config"
)

// configFiles expands serve's and check-config's -c values: a file is taken as it is, a
// directory gives its *.yml and *.yaml files in name order.
func configFiles(values []string) ([]string, error) {
	var files []string
	for _, v := range values {
		fi, err := os.Stat(v)
		if err != nil {
			return nil, fmt.Errorf("config: cannot read %s: %w", v, err)
		}
		if !fi.IsDir() {
			files = append(files, v)
			continue
		}
		var inDir []string
		for _, pattern := range []string{"*.yml", "*.yaml"} {
			m, err := filepath.Glob(filepath.Join(v, pattern))
			if err != nil {
				return nil, fmt.Errorf("config: cannot list %s: %w", v, err)
			}
			inDir = append(inDir, m...)
		}
		if len(inDir) == 0 {
			return nil, fmt.Errorf("config: %s holds no *.yml file", v)
		}
		sort.Strings(inDir)
		files = append(files, inDir...)
	}
	return files, nil
}

// loadConfigs reads every instance's config: the -c files (see configFiles), or without
// any the one config.Resolve finds. Several configs must not clash (see clashes).
func loadConfigs(values []string, env func(string) (string, bool)) ([]*config.Config, error) {
	if len(values) == 0 {
		cfg, err := loadConfig(env)
		if err != nil {
			return nil, err
		}
		return []*config.Config{cfg}, nil
	}
	files, err := configFiles(values)
	if err != nil {
		return nil, &exitError{code: config.ExitConfig, err: err}
	}
	cfgs := make([]*config.Config, 0, len(files))
	for _, f := range files {
		cfg, err := config.Load(f, env)
		if err != nil {
			return nil, &exitError{code: config.ExitConfig, err: err}
		}
		cfgs = append(cfgs, cfg)
	}
	if problems := clashes(cfgs); len(problems) > 0 {
		return nil, &exitError{code: config.ExitConfig, err: fmt.Errorf("config: the instances clash: %s", strings.Join(problems, "; "))}
	}
	return cfgs, nil
}

// clashes lists what two instances of one process would fight over: an instance name (the
// log field, the actor system's name, the metrics' instance label), an instance directory
// (<data_dir>/<instance>: one RocksDB lock) or a listening port. Port 0 (a free port) never
// clashes; an address on all interfaces clashes with any address on the same port.
func clashes(cfgs []*config.Config) []string {
	var problems []string
	names := make(map[string]string)
	dirs := make(map[string]string)
	type listen struct{ owner, ip string }
	ports := make(map[int][]listen)
	for _, c := range cfgs {
		who := c.Instance + " (" + c.File + ")"
		if prev, ok := names[c.Instance]; ok {
			problems = append(problems, fmt.Sprintf("instance %q is named by %s and %s", c.Instance, prev, c.File))
		}
		names[c.Instance] = c.File
		dir, err := filepath.Abs(filepath.Join(c.Node.DataDir, c.Instance))
		if err != nil {
			dir = filepath.Clean(filepath.Join(c.Node.DataDir, c.Instance))
		}
		if prev, ok := dirs[dir]; ok {
			problems = append(problems, fmt.Sprintf("node.data_dir: %s and %s both keep their data in %s", prev, who, dir))
		}
		dirs[dir] = who
		addrs := []struct {
			key  string
			ip   string
			port int
			on   bool
		}{
			{"http.port", c.HTTP.IP, c.HTTP.Port, c.HasRole(config.RoleEdge)},
			{"admin.port", c.Admin.IP, c.Admin.Port, c.Admin.Enabled},
			{"claim_check.port", c.ClaimCheck.IP, c.ClaimCheck.Port, c.HasRole(config.RoleClaimCheck)},
		}
		for _, a := range addrs {
			if !a.on || a.port == 0 {
				continue
			}
			for _, l := range ports[a.port] {
				if l.ip == a.ip || anyIP(l.ip) || anyIP(a.ip) {
					problems = append(problems, fmt.Sprintf("%s: %s listens on %s, taken by %s",
						a.key, who, net.JoinHostPort(a.ip, strconv.Itoa(a.port)), l.owner))
					break
				}
			}
			ports[a.port] = append(ports[a.port], listen{owner: who + " " + a.key, ip: a.ip})
		}
	}
	return problems
}

// anyIP reports whether ip means every interface.
func anyIP(ip string) bool {
	if ip == "" {
		return true
	}
	p := net.ParseIP(ip)
	return p != nil && p.IsUnspecified()
}
