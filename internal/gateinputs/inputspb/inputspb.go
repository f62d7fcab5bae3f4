// Package inputspb converts approver-input forms between gateinputs.Field and the wire's
// rbook.v1.InputField (proto/rbook/v1/inputs.proto), for the executor, which sends a gate's
// form, and the control plane, which stores it and returns it on Approval.
package inputspb

import (
	rbookv1 "github.com/rbookhq/rbook-action/gen/rbook/v1"
	"github.com/rbookhq/rbook-action/internal/gateinputs"
)

// ToProto is fields on the wire; nil for none.
func ToProto(fields []gateinputs.Field) []*rbookv1.InputField {
	if len(fields) == 0 {
		return nil
	}
	out := make([]*rbookv1.InputField, len(fields))
	for i, f := range fields {
		out[i] = &rbookv1.InputField{Name: f.Name, Type: f.Type, Required: f.Required, Pattern: f.Pattern,
			Options: f.Options, DefaultValue: f.Default, HasDefault: f.HasDefault, Description: f.Description}
	}
	return out
}

// FromProto is the wire's fields as gateinputs.Field, unchecked (gateinputs.Check them); nil
// for none.
func FromProto(fields []*rbookv1.InputField) []gateinputs.Field {
	if len(fields) == 0 {
		return nil
	}
	out := make([]gateinputs.Field, len(fields))
	for i, f := range fields {
		out[i] = gateinputs.Field{Name: f.GetName(), Type: f.GetType(), Required: f.GetRequired(), Pattern: f.GetPattern(),
			Options: f.GetOptions(), Default: f.GetDefaultValue(), HasDefault: f.GetHasDefault(), Description: f.GetDescription()}
	}
	return out
}
