module github.com/stateseal/stateseal

go 1.26.0

require (
	github.com/gowebpki/jcs v1.0.2
	github.com/segmentio/asm v1.2.1
	golang.org/x/crypto v0.59.0
)

require golang.org/x/sys v0.50.0 // indirect
