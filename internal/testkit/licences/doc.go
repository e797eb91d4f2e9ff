// Package licences holds the tests of scripts/licences, the check that
// every dependency built into tare is under a licence on the allow-list and
// that THIRD_PARTY_NOTICES matches the module graph. It has no code of its
// own: the check is the script, so that CI and a person run the same thing.
package licences
