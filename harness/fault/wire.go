package fault

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/faultline-dev/faultline/proxies"
)

// A fault's struct is its own wire form: each field with a `json` tag is
// a parameter of its kind, written under that name after "kind" and left
// out where it is zero. A field's Go type is written as data: a
// time.Duration as "5s" (Duration), a Trigger as TriggerData, a *Sync as
// SyncData and a proxies.Toxic as ToxicData, each read back checked; any
// other type as encoding/json writes it. Reading refuses a field the
// struct does not have.

var (
	durationType = reflect.TypeFor[time.Duration]()
	triggerType  = reflect.TypeFor[Trigger]()
	syncType     = reflect.TypeFor[*Sync]()
	toxicType    = reflect.TypeFor[proxies.Toxic]()
)

// wireField is one parameter of a fault struct: its index and its name.
type wireField struct {
	index int
	name  string
}

// wireFields are the parameters of the struct type t, in field order.
func wireFields(t reflect.Type) []wireField {
	var out []wireField
	for i := range t.NumField() {
		tag, ok := t.Field(i).Tag.Lookup("json")
		name, _, _ := strings.Cut(tag, ",")
		if !ok || name == "" || name == "-" {
			continue
		}
		out = append(out, wireField{i, name})
	}
	return out
}

// encodeWire writes f (a fault struct) as a JSON object whose first field
// is "kind": name.
func encodeWire(name string, f any) ([]byte, error) {
	v := reflect.ValueOf(f)
	var buf bytes.Buffer
	kind, _ := json.Marshal(name)
	buf.WriteString(`{"kind":`)
	buf.Write(kind)
	for _, wf := range wireFields(v.Type()) {
		fv := v.Field(wf.index)
		if fv.IsZero() {
			continue
		}
		data, err := toWire(fv)
		if err != nil {
			return nil, fmt.Errorf("%s fault: %s: %w", name, wf.name, err)
		}
		body, err := json.Marshal(data)
		if err != nil {
			return nil, fmt.Errorf("%s fault: %s: %w", name, wf.name, err)
		}
		key, _ := json.Marshal(wf.name)
		buf.WriteByte(',')
		buf.Write(key)
		buf.WriteByte(':')
		buf.Write(body)
	}
	buf.WriteByte('}')
	return buf.Bytes(), nil
}

// toWire is the data a field's value is written as.
func toWire(fv reflect.Value) (any, error) {
	switch fv.Type() {
	case durationType:
		return Duration(fv.Int()), nil
	case triggerType:
		return fv.Interface().(Trigger).Data(), nil
	case syncType:
		return fv.Interface().(*Sync).Data(), nil
	case toxicType:
		return ToxicDataOf(fv.Interface().(proxies.Toxic))
	}
	return fv.Interface(), nil
}

// decodeWire reads the object data (with its "kind" field) into the fault
// struct *f, checking each field's data; a field *f does not have is an
// error.
func decodeWire(name string, data []byte, f any) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil {
		return fmt.Errorf("%s fault: %w", name, err)
	}
	delete(fields, "kind")
	v := reflect.ValueOf(f).Elem()
	var errs []error
	for _, wf := range wireFields(v.Type()) {
		raw, ok := fields[wf.name]
		delete(fields, wf.name)
		if !ok || string(raw) == "null" {
			continue
		}
		if err := fromWire(raw, v.Field(wf.index)); err != nil {
			errs = append(errs, fmt.Errorf("%s fault: %s: %w", name, wf.name, err))
		}
	}
	for key := range fields {
		errs = append(errs, fmt.Errorf("%s fault: unknown field %q", name, key))
	}
	return errors.Join(errs...)
}

// fromWire reads a field's data into fv, checked.
func fromWire(raw json.RawMessage, fv reflect.Value) error {
	var v any
	var err error
	switch fv.Type() {
	case durationType:
		v, err = fromData(raw, func(d *Duration) (time.Duration, error) { return time.Duration(*d), nil })
	case triggerType:
		v, err = fromData(raw, func(d *TriggerData) (Trigger, error) { return d.Trigger(), nil })
	case syncType:
		v, err = fromData(raw, (*SyncData).Sync)
	case toxicType:
		v, err = fromData(raw, (*ToxicData).Toxic)
	default:
		p := reflect.New(fv.Type())
		if err := strict(raw, p.Interface()); err != nil {
			return err
		}
		fv.Set(p.Elem())
		return nil
	}
	if err != nil {
		return err
	}
	fv.Set(reflect.ValueOf(v).Convert(fv.Type()))
	return nil
}

// fromData reads raw as the data D and converts it to the field's value.
func fromData[D, V any](raw json.RawMessage, convert func(*D) (V, error)) (V, error) {
	var d D
	if err := strict(raw, &d); err != nil {
		var zero V
		return zero, err
	}
	return convert(&d)
}

// strict decodes raw into v, refusing fields v does not have.
func strict(raw json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
