// Package settings is the language in which a window is asked for: each
// setting a Field (its flag, its plan key, its help) whose Value satisfies
// pflag's Value, so that the command line binds it as it is and a plan
// file sets it through the same Set; what is wrong with one is an *Error
// that keeps the settings it names as names, so that the command line
// words them "--flag" and a plan "key:". Record is how a run keeps the
// settings it was given, secrets redacted.
//
// The package is stdlib-only beside the root: it satisfies pflag.Value by
// its method set, without importing pflag.
package settings
