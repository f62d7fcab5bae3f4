package notify

import (
	"time"

	"go.yaml.in/yaml/v3"
)

// MinRetention is the shortest retention a notification config may set: a delivery's rows
// outlive the time an operator takes to look at a failure.
const MinRetention = time.Hour

// retention reads retention: a duration (Go syntax, e.g. 720h) of at least MinRetention.
func (p *parser) retention(n *yaml.Node, field string) (time.Duration, error) {
	s, err := p.str(n, field)
	if err != nil {
		return 0, err
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < MinRetention {
		return 0, p.errAt(n, "%s: %q: want a duration of at least %s, such as 720h (30 days, the default)", field, s, MinRetention)
	}
	return d, nil
}
