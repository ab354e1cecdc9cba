package envelope

import "encoding/binary"

// BindingFields is the number of fields AppendBinding encodes. It is part of
// the encoding, so adding a field later changes every MAC input and AEAD
// associated data, and old and new bindings can never collide.
const BindingFields = 7

// AppendBinding appends the encoding of the binding fields: the field count,
// then each field as its length and its bytes, counts and lengths as
// unsigned LEB128 varints (encoding/binary's uvarint). Like PASETO's PAE,
// every field is length-prefixed, so no two different bindings encode to
// the same bytes; varints keep the prefixes to one byte for short fields,
// which keeps the bytes hashed per call close to the payload alone.
func AppendBinding(dst []byte, method, target, principal, audience, session string, argsDigest, context []byte) []byte {
	dst = binary.AppendUvarint(dst, BindingFields)
	dst = appendString(dst, method)
	dst = appendString(dst, target)
	dst = appendString(dst, principal)
	dst = appendString(dst, audience)
	dst = appendString(dst, session)
	dst = appendString(dst, string(argsDigest))
	return appendString(dst, string(context))
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// BindingLen returns the number of bytes AppendBinding appends.
func BindingLen(method, target, principal, audience, session string, argsDigest, context []byte) int {
	return uvarintLen(BindingFields) + strLen(method) + strLen(target) + strLen(principal) +
		strLen(audience) + strLen(session) + strLen(string(argsDigest)) + strLen(string(context))
}

func strLen(s string) int { return uvarintLen(uint64(len(s))) + len(s) }

func uvarintLen(x uint64) int {
	n := 1
	for ; x >= 0x80; x >>= 7 {
		n++
	}
	return n
}
