// compose-check loads a compose file the way docker compose v2 does (compose-go: schema
// validation, interpolation, normalisation) without a Docker engine, and prints the
// names of its services, one per line. Exit 1 with the loader's message if it is invalid.
package main

import (
	"context"
	"fmt"
	"os"
	"sort"

	"github.com/compose-spec/compose-go/v2/cli"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: compose-check FILE...")
		os.Exit(2)
	}
	options, err := cli.NewProjectOptions(os.Args[1:], cli.WithName("compose-check"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	project, err := options.LoadProject(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	names := project.ServiceNames()
	sort.Strings(names)
	for _, name := range names {
		fmt.Println(name)
	}
}
