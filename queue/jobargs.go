package queue

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/tare-dev/tare"
)

// JobArgs are a framework job's positional and keyword arguments, as JSON
// templates: every string in them has "{{seq}}" replaced by the job's
// number, "{{id}}" by its framework id and "{{prompt}}" by its prompt; a
// string that is exactly "{{seq}}" becomes the number itself.
type JobArgs struct {
	args   []any
	kwargs map[string]any
	data   any // a BullMQ job's data (ParseJobData); nil for none
}

// ParseJobArgs parses --job-args (a JSON list, "" for none) and
// --job-kwargs (a JSON object, "" for none); a bad one is a *tare.Error
// with code EINVALID naming the flag.
func ParseJobArgs(args, kwargs string) (JobArgs, error) {
	var a JobArgs
	if strings.TrimSpace(args) != "" {
		if err := json.Unmarshal([]byte(args), &a.args); err != nil || a.args == nil {
			return JobArgs{}, tare.SettingErrorf(tare.EINVALID, "job-args", "%q: want a JSON list, like '[\"{{seq}}\", \"hello\"]'", args)
		}
	}
	if strings.TrimSpace(kwargs) != "" {
		if err := json.Unmarshal([]byte(kwargs), &a.kwargs); err != nil || a.kwargs == nil {
			return JobArgs{}, tare.SettingErrorf(tare.EINVALID, "job-kwargs", "%q: want a JSON object, like '{\"prompt\": \"{{prompt}}\", \"n\": \"{{seq}}\"}'", kwargs)
		}
	}
	return a, nil
}

// ParseJobData parses a BullMQ job's data: --job-args, any JSON value
// (an object, usually), "" for none; --job-kwargs must be "", as a
// BullMQ job has one data value, not arguments. A bad one is a
// *tare.Error with code EINVALID naming the flag.
func ParseJobData(args, kwargs string) (JobArgs, error) {
	if strings.TrimSpace(kwargs) != "" {
		return JobArgs{}, tare.SettingErrorf(tare.EINVALID, "job-kwargs", "%q: a BullMQ job has one data value, not keyword arguments: give it with %s, like '{\"prompt\": \"{{prompt}}\", \"n\": \"{{seq}}\"}'", kwargs, tare.Setting("job-args"))
	}
	var a JobArgs
	if strings.TrimSpace(args) != "" {
		if err := json.Unmarshal([]byte(args), &a.data); err != nil {
			return JobArgs{}, tare.SettingErrorf(tare.EINVALID, "job-args", "%q: want the job's data as JSON, like '{\"prompt\": \"{{prompt}}\", \"n\": \"{{seq}}\"}'", args)
		}
	}
	return a, nil
}

// ParseJobArgsFor parses --job-args and --job-kwargs for the protocol of
// the queue URL rawURL: a BullMQ job's data (ParseJobData), or a Celery
// or RQ task's arguments (ParseJobArgs).
func ParseJobArgsFor(rawURL, args, kwargs string) (JobArgs, error) {
	if ProtocolOf(rawURL) == ProtocolBullMQ {
		return ParseJobData(args, kwargs)
	}
	return ParseJobArgs(args, kwargs)
}

// ExpandData returns the data of one job, {} when none was given (what
// BullMQ stores for data left undefined).
func (a JobArgs) ExpandData(j Job, id string) any {
	if a.data == nil {
		return map[string]any{}
	}
	return a.walker(j, id)(a.data)
}

// walker returns the function that replaces the placeholders in a JSON
// value for one job, copying what it changes.
func (a JobArgs) walker(j Job, id string) func(any) any {
	seq, _ := strconv.ParseUint(j.ID, 10, 64)
	r := strings.NewReplacer("{{seq}}", j.ID, "{{id}}", id, "{{prompt}}", j.Prompt)
	var walk func(v any) any
	walk = func(v any) any {
		switch v := v.(type) {
		case string:
			if v == "{{seq}}" {
				return seq
			}
			return r.Replace(v)
		case []any:
			out := make([]any, len(v))
			for i, x := range v {
				out[i] = walk(x)
			}
			return out
		case map[string]any:
			out := make(map[string]any, len(v))
			for k, x := range v {
				out[k] = walk(x)
			}
			return out
		}
		return v
	}
	return walk
}

// Expand returns the arguments of one job: never nil, so they encode as
// [] and {}.
func (a JobArgs) Expand(j Job, id string) ([]any, map[string]any) {
	walk := a.walker(j, id)
	args := walk(append([]any{}, a.args...)).([]any)
	kwargs := map[string]any{}
	if a.kwargs != nil {
		kwargs = walk(a.kwargs).(map[string]any)
	}
	return args, kwargs
}
