// Command nodeps has no dependencies: its notices list nothing.
package main

func main() {}
