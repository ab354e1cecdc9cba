module github.com/stateseal/stateseal/bench

go 1.26.0

replace github.com/stateseal/stateseal => ../

require (
	aidanwoods.dev/go-paseto v1.6.0
	github.com/go-json-experiment/json v1.27.2
	github.com/gorilla/securecookie v1.1.2
	github.com/gowebpki/jcs v1.0.2
	github.com/modelcontextprotocol/go-sdk v1.8.0
	github.com/stateseal/stateseal v0.0.0-00010101000000-000000000000
	github.com/tink-crypto/tink-go/v2 v2.9.0
	golang.org/x/crypto v0.59.0
)

require (
	aidanwoods.dev/go-result v0.3.1 // indirect
	github.com/google/jsonschema-go v0.4.3 // indirect
	github.com/segmentio/asm v1.2.1 // indirect
	github.com/segmentio/encoding v0.5.4 // indirect
	github.com/yosida95/uritemplate/v3 v3.0.2 // indirect
	golang.org/x/oauth2 v0.38.0 // indirect
	golang.org/x/sync v0.25.0 // indirect
	golang.org/x/sys v0.50.0 // indirect
	golang.org/x/time v0.16.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)
