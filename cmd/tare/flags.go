package main

import (
	"context"

	"github.com/spf13/pflag"

	"github.com/tare-dev/tare"
	"github.com/tare-dev/tare/host"
	"github.com/tare-dev/tare/settings"
	"github.com/tare-dev/tare/store"
)

// bind makes each field a flag of fs, its value now the default. A
// setting is a pflag.Value already; what pflag's own VarP leaves out for
// one of its own kinds is set here: a bool flag takes no value, and a
// default that is the kind's zero ("0s", "[]") is not printed in --help.
func bind(fs *pflag.FlagSet, fields ...[]settings.Field) {
	for _, list := range fields {
		for _, f := range list {
			fl := fs.VarPF(f.Value, f.Flag, f.Short, f.Usage)
			if f.IsBool() {
				fl.NoOptDefVal = "true"
			}
			if fl.DefValue == "0s" || fl.DefValue == "[]" {
				fl.DefValue = ""
			}
		}
	}
}

// outputFlags say how the summary is printed.
type outputFlags struct {
	json  bool
	quiet bool
}

func (f *outputFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&f.json, "json", false, "print the tare.summary/v1 JSON instead of the text summary")
	fs.BoolVar(&f.quiet, "quiet", false, "no progress line")
}

// storeFlags say where runs are kept.
type storeFlags struct {
	db      string
	noStore bool
}

func (f *storeFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.db, "db", "", "where runs are kept: a SQLite file, or postgres://… for a shared team store (default $TARE_DB, or the file $TARE_DB_FILE names, else ~/.local/share/tare/tare.db)")
}

func (f *storeFlags) registerNoStore(fs *pflag.FlagSet) {
	f.register(fs)
	fs.BoolVar(&f.noStore, "no-store", false, "do not store the run")
}

// open opens the store, or returns nil with --no-store. A store that
// cannot be opened or written is an error here, before any load is sent.
func (f *storeFlags) open(ctx context.Context) (tare.Store, error) {
	if f.noStore {
		return nil, nil
	}
	return store.OpenWith(ctx, f.db, store.Settings{Processes: host.Processes{}})
}
