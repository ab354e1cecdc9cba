// Package internal holds, in its subpackages, only code that every layer
// of this module builds on: the wire format (envelope, keysetjson,
// canonjson, and jsonscan, the JSON scanning it shares with the
// gateway's reader), small helpers the plug-ins share (schemes, redact,
// localkek, loopback, vaultclient, keymaterial, share), and what every
// test shares (testkit, testservers). Nothing here imports a package of a
// layer above it (seal, keyset, stores, replay, rotation, mrtr, gateway,
// ...): a harness that drives those lives on the floor of the highest
// layer it imports (rotation/faulttest, mrtr/metricstest,
// gateway/gatewaytest). The two exceptions are tests only: integration
// and clients run the module's layers and binaries together, and import
// nothing into them.
package internal
