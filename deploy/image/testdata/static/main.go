// Command static is a stand-in binary for the image tests: static when
// built with CGO_ENABLED=0, it prints its arguments.
package main

import (
	"fmt"
	"os"
)

func main() { fmt.Println(os.Args[1:]) }
