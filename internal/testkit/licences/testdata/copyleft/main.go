// Command copyleft is a throwaway program that depends on a GPL-3.0 module
// (github.com/foxcpp/maddy, the mail server: small, and served by the Go
// module proxy), so that the licence check has something to refuse.
package main

import "github.com/foxcpp/maddy/framework/address"

func main() { _ = address.Equal }
