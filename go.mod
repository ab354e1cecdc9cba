module github.com/stateseal/stateseal

go 1.26.0

require (
	github.com/gowebpki/jcs v1.0.2
	github.com/rogpeppe/go-internal v1.16.0
	github.com/segmentio/asm v1.2.1
	github.com/spf13/cobra v1.10.2
	golang.org/x/crypto v0.59.0
)

require (
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/spf13/pflag v1.0.9 // indirect
	golang.org/x/sys v0.50.0 // indirect
	golang.org/x/tools v0.26.0 // indirect
)
