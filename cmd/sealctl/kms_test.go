package main

import (
	"context"
	"fmt"
	"net/url"
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
			env.Setenv("GCPKMS_URL", fmt.Sprintf("gcpkms://%s?endpoint=%s&insecure=1", g.NewKey("ring", name), g.Addr))
			for _, kv := range [][2]string{
				{"AWS_ACCESS_KEY_ID", "local-kms-test"}, {"AWS_SECRET_ACCESS_KEY", "local-kms-test"},
				{"AWS_EC2_METADATA_DISABLED", "true"}, {"VAULT_ADDR", v.URL()}, {"VAULT_TOKEN", v.Token},
			} {
				env.Setenv(kv[0], kv[1])
			}
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"keyids": keyIDs,
			// vaultrotate rotates the script's transit key inside Vault.
			"vaultrotate": func(ts *testscript.TestScript, neg bool, args []string) {
				_, err := vc.Logical().Write("transit/keys/"+ts.Getenv("VAULT_KEY")+"/rotate", nil)
				ts.Check(err)
			},
		},
	})
}
