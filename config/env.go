package config

import (
	"slices"
	"strconv"
	"strings"
)

// applyEnv applies the ANKUSA_* overrides (env beats file). A variable set to "" counts as unset, so an
// orchestrator that always passes the name does not override the file. A bad value is a problem whose
// path is the variable's name, and leaves the file's value in place so it is not reported twice.
// Sources and sinks are never overridable from the environment.
func applyEnv(c *Config, env func(string) (string, bool), ps *problems) {
	get := func(name string) (string, bool) {
		v, ok := env(name)
		return v, ok && v != ""
	}
	if v, ok := get("ANKUSA_INSTANCE"); ok {
		if validID(v) {
			c.Instance = v
		} else {
			ps.add("ANKUSA_INSTANCE", "must match [A-Za-z0-9_-]{1,64}, got %s", quote(v))
		}
	}
	if v, ok := get("ANKUSA_DATA_DIR"); ok {
		c.Node.DataDir = v
	}
	portVar := "ANKUSA_HTTP_PORT"
	v, ok := get(portVar)
	if !ok {
		portVar = "PORT"
		v, ok = get(portVar)
	}
	if ok {
		envPort(ps, portVar, v, &c.HTTP.Port)
	}
	if v, ok := get("ANKUSA_ADMIN_PORT"); ok {
		envPort(ps, "ANKUSA_ADMIN_PORT", v, &c.Admin.Port)
	}
	if v, ok := get("ANKUSA_ADMIN_IP"); ok {
		if validIP(v) {
			c.Admin.IP = v
		} else {
			ps.mustBe("ANKUSA_ADMIN_IP", "an IPv4 or IPv6 literal", quote(v))
		}
	}
	if v, ok := get("ANKUSA_ROLES"); ok {
		if roles, good := envRoles(ps, v); good {
			c.Node.Roles = roles
		}
	}
	if v, ok := get("ANKUSA_WAL_TYPE"); ok {
		if slices.Contains(walTypes, v) {
			c.WAL.Type = v
		} else {
			ps.oneOf("ANKUSA_WAL_TYPE", walTypes, v)
		}
	}
	if v, ok := get("ANKUSA_LOG_LEVEL"); ok {
		if slices.Contains(logLevels, v) {
			c.Log.Level = v
		} else {
			ps.oneOf("ANKUSA_LOG_LEVEL", logLevels, v)
		}
	}
	if v, ok := get("ANKUSA_LOG_FORMAT"); ok {
		if slices.Contains(logFormats, v) {
			c.Log.Format = v
		} else {
			ps.oneOf("ANKUSA_LOG_FORMAT", logFormats, v)
		}
	}
	if v, ok := get("ANKUSA_BACKUP_ENABLED"); ok {
		switch strings.ToLower(v) {
		case "true", "1":
			c.Backup.Enabled = true
		case "false", "0":
			c.Backup.Enabled = false
		default:
			ps.mustBe("ANKUSA_BACKUP_ENABLED", "true or false", quote(v))
		}
	}
}

// envRoles parses ANKUSA_ROLES, a comma list; blanks around names and repeats are tolerated.
func envRoles(ps *problems, v string) ([]string, bool) {
	var roles []string
	good := true
	for _, r := range strings.Split(v, ",") {
		r = strings.TrimSpace(r)
		switch {
		case r == "":
		case !slices.Contains(roleNames, r):
			ps.add("ANKUSA_ROLES", "must be a comma list of %s, got unknown role %s", strings.Join(roleNames, "|"), quote(r))
			good = false
		case !slices.Contains(roles, r):
			roles = append(roles, r)
		}
	}
	if good && len(roles) == 0 {
		ps.add("ANKUSA_ROLES", "must name at least one role")
		good = false
	}
	return roles, good
}

func envPort(ps *problems, name, v string, dst *int) {
	p, err := strconv.Atoi(v)
	if err != nil || p < 0 || p > 65535 {
		ps.mustBe(name, "a port 0..65535", quote(v))
		return
	}
	*dst = p
}
