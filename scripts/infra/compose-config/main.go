// compose-config loads a Compose file with compose-go, the loader Docker Compose v2 itself uses,
// and prints the resolved project as JSON: the file is parsed, interpolated from the environment,
// merged (YAML anchors and `<<`), validated against the Compose specification's schema and
// normalised, exactly as `docker compose config` would, without a Docker engine.
//
//	go run . <compose-file>        exit 0 and the JSON on stdout, or exit 1 and the problem on stderr
//
// The tests (test/integration/containers.test.ts) run it on docker-compose.yml.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/compose-spec/compose-go/v2/cli"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: compose-config <compose-file>")
		os.Exit(2)
	}
	file, err := filepath.Abs(os.Args[1])
	if err != nil {
		fail(err)
	}
	options, err := cli.NewProjectOptions(
		[]string{file},
		cli.WithOsEnv,
		cli.WithWorkingDirectory(filepath.Dir(file)),
		cli.WithName("referral"),
	)
	if err != nil {
		fail(err)
	}
	project, err := options.LoadProject(context.Background())
	if err != nil {
		fail(err)
	}
	out, err := json.MarshalIndent(project, "", "  ")
	if err != nil {
		fail(err)
	}
	fmt.Println(string(out))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
