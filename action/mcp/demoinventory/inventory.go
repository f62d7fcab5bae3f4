package demoinventory

import "strings"

// The two fictional subscriptions of the demo inventory. They are not GUIDs on purpose: no
// one can mistake them for a real Azure subscription.
const (
	SubscriptionProd = "sub-demo-prod"
	SubscriptionDev  = "sub-demo-dev"
)

// Resources returns the demo inventory: ten fictional resources in SubscriptionProd and
// SubscriptionDev, shaped like Azure Resource Graph rows (type in lower case, as ARG returns
// it). Each call returns fresh values, so callers may modify them.
//
// Built in to make checks fail on purpose: app-legacy-api has no owner tag and httpsOnly
// false; stscratchdev has an empty owner; vm-web-02 is deallocated; app-checkout-dev has
// httpsOnly false.
func Resources() []Row {
	type spec struct {
		sub, rg, provider, name, location string
		tags                              map[string]any
		props                             map[string]any
	}
	specs := []spec{
		{SubscriptionProd, "rg-web-prod", "Microsoft.Compute/virtualMachines", "vm-web-01", "westeurope",
			map[string]any{"owner": "alice", "env": "prod"}, map[string]any{"powerState": "running", "osType": "Linux"}},
		{SubscriptionProd, "rg-web-prod", "Microsoft.Compute/virtualMachines", "vm-web-02", "westeurope",
			map[string]any{"owner": "alice", "env": "prod"}, map[string]any{"powerState": "deallocated", "osType": "Linux"}},
		{SubscriptionProd, "rg-web-prod", "Microsoft.Web/sites", "app-checkout", "westeurope",
			map[string]any{"owner": "bob", "env": "prod"}, map[string]any{"httpsOnly": true, "state": "Running"}},
		{SubscriptionProd, "rg-legacy-prod", "Microsoft.Web/sites", "app-legacy-api", "northeurope",
			map[string]any{"env": "prod"}, map[string]any{"httpsOnly": false, "state": "Running"}},
		{SubscriptionProd, "rg-web-prod", "Microsoft.Storage/storageAccounts", "stcheckoutprod", "westeurope",
			map[string]any{"owner": "bob", "env": "prod"}, map[string]any{"supportsHttpsTrafficOnly": true, "allowBlobPublicAccess": false}},
		{SubscriptionProd, "rg-web-prod", "Microsoft.KeyVault/vaults", "kv-checkout-prod", "westeurope",
			map[string]any{"owner": "carol", "env": "prod"}, map[string]any{"enableSoftDelete": true}},
		{SubscriptionDev, "rg-build-dev", "Microsoft.Compute/virtualMachines", "vm-build-01", "eastus",
			map[string]any{"owner": "dave", "env": "dev"}, map[string]any{"powerState": "running", "osType": "Linux"}},
		{SubscriptionDev, "rg-web-dev", "Microsoft.Web/sites", "app-checkout-dev", "eastus",
			map[string]any{"owner": "bob", "env": "dev"}, map[string]any{"httpsOnly": false, "state": "Running"}},
		{SubscriptionDev, "rg-build-dev", "Microsoft.Storage/storageAccounts", "stscratchdev", "eastus",
			map[string]any{"owner": "", "env": "dev"}, map[string]any{"supportsHttpsTrafficOnly": true, "allowBlobPublicAccess": true}},
		{SubscriptionDev, "rg-data-dev", "Microsoft.Sql/servers", "sql-reporting-dev", "eastus",
			map[string]any{"owner": "erin", "env": "dev"}, map[string]any{"publicNetworkAccess": "Enabled"}},
	}
	rows := make([]Row, 0, len(specs))
	for _, s := range specs {
		rows = append(rows, Row{
			"id":             "/subscriptions/" + s.sub + "/resourceGroups/" + s.rg + "/providers/" + s.provider + "/" + s.name,
			"name":           s.name,
			"type":           strings.ToLower(s.provider),
			"resourceGroup":  s.rg,
			"location":       s.location,
			"subscriptionId": s.sub,
			"tags":           s.tags,
			"properties":     s.props,
		})
	}
	return rows
}
