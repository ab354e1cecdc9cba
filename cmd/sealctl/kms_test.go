package main

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/hashicorp/vault/api"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/stateseal/stateseal/internal/testservers"
)

// TestKMSScripts runs the scripts in testdata/kms against real servers:
// local-kms for AWS KMS, a Vault dev server for transit, and the Cloud KMS
// test server, and Redis and Vault KV v2 as keyset stores. Each script gets
// $AWSKMS_URL, $VAULT_URL and $GCPKMS_URL, a fresh key in each,
// $REDIS_KEYSET and $VAULTKV_KEYSET, empty stores, and the environment
// their clients read.
func TestKMSScripts(t *testing.T) {
	ctx := context.Background()
	lk := testservers.StartLocalKMS(t, "")
	v := testservers.StartVault(t)
	g := testservers.StartGCPKMS(t)
	r := testservers.StartRedis(t)
	vc, err := api.NewClient(&api.Config{Address: v.URL()})
	if err != nil {
		t.Fatal(err)
	}
	vc.SetToken(v.Token)
	if err := vc.Sys().Mount("transit", &api.MountInput{Type: "transit"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion(lk.Region))
	if err != nil {
		t.Fatal(err)
	}
	awsc := kms.NewFromConfig(cfg, func(o *kms.Options) { o.BaseEndpoint = aws.String(lk.Endpoint()) })
	// The runbook scripts' instances run in this process (instance_test.go),
	// and their clients read the same environment as sealctl's.
	for _, kv := range [][2]string{
		{"AWS_ACCESS_KEY_ID", "local-kms-test"}, {"AWS_SECRET_ACCESS_KEY", "local-kms-test"},
		{"AWS_EC2_METADATA_DISABLED", "true"}, {"VAULT_ADDR", v.URL()}, {"VAULT_TOKEN", v.Token},
	} {
		t.Setenv(kv[0], kv[1])
	}
	var n atomic.Int64 // scripts run in parallel
	testscript.Run(t, testscript.Params{
		Dir: "testdata/kms",
		Setup: func(env *testscript.Env) error {
			out, err := awsc.CreateKey(ctx, &kms.CreateKeyInput{})
			if err != nil {
				return err
			}
			name := fmt.Sprintf("script-%d", n.Add(1))
			if _, err := vc.Logical().Write("transit/keys/"+name, nil); err != nil {
				return err
			}
			env.Setenv("AWSKMS_URL", fmt.Sprintf("awskms://%s?region=%s&endpoint=%s", *out.KeyMetadata.KeyId, lk.Region, url.QueryEscape(lk.Endpoint())))
			env.Setenv("VAULT_URL", "vault://transit/keys/"+name)
			env.Setenv("VAULT_KEY", name)
			env.Setenv("REDIS_KEYSET", r.URL()+"?key=stateseal:"+name)
			env.Setenv("VAULTKV_KEYSET", "vault-kv://secret/stateseal/"+name)
			gk := g.NewKey("ring", name)
			env.Setenv("GCP_KEY", gk)
			env.Setenv("GCPKMS_URL", fmt.Sprintf("gcpkms://%s?endpoint=%s&insecure=1", gk, g.Addr))
			setupInstances(env)
			for _, kv := range [][2]string{
				{"AWS_ACCESS_KEY_ID", "local-kms-test"}, {"AWS_SECRET_ACCESS_KEY", "local-kms-test"},
				{"AWS_EC2_METADATA_DISABLED", "true"}, {"VAULT_ADDR", v.URL()}, {"VAULT_TOKEN", v.Token},
			} {
				env.Setenv(kv[0], kv[1])
			}
			return nil
		},
		Cmds: withInstances(map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"keyids":  keyIDs,
			"putback": putBack,
			// vaultmindecrypt N makes the script's transit key refuse to
			// decrypt with versions below N.
			"vaultmindecrypt": func(ts *testscript.TestScript, neg bool, args []string) {
				_, err := vc.Logical().Write("transit/keys/"+ts.Getenv("VAULT_KEY")+"/config", map[string]any{"min_decryption_version": args[0]})
				ts.Check(err)
			},
			// gcprotate adds a primary version to the script's Cloud KMS
			// key; gcpdisable N disables its version N.
			"gcprotate": func(ts *testscript.TestScript, neg bool, args []string) { g.Rotate(ts.Getenv("GCP_KEY")) },
			"gcpdisable": func(ts *testscript.TestScript, neg bool, args []string) {
				v, err := strconv.Atoi(args[0])
				ts.Check(err)
				g.Disable(ts.Getenv("GCP_KEY"), v)
			},
			// awsnewkey VAR creates an AWS KMS key and sets $VAR to its
			// URL, $VAR_ID to its id; awsdisable ID disables the key.
			"awsnewkey": func(ts *testscript.TestScript, neg bool, args []string) {
				out, err := awsc.CreateKey(ctx, &kms.CreateKeyInput{})
				ts.Check(err)
				ts.Setenv(args[0], fmt.Sprintf("awskms://%s?region=%s&endpoint=%s", *out.KeyMetadata.KeyId, lk.Region, url.QueryEscape(lk.Endpoint())))
				ts.Setenv(args[0]+"_ID", *out.KeyMetadata.KeyId)
			},
			"awsdisable": func(ts *testscript.TestScript, neg bool, args []string) {
				_, err := awsc.DisableKey(ctx, &kms.DisableKeyInput{KeyId: aws.String(args[0])})
				ts.Check(err)
			},
			// vaultrotate rotates the script's transit key inside Vault.
			"vaultrotate": func(ts *testscript.TestScript, neg bool, args []string) {
				_, err := vc.Logical().Write("transit/keys/"+ts.Getenv("VAULT_KEY")+"/rotate", nil)
				ts.Check(err)
			},
		}),
	})
}
