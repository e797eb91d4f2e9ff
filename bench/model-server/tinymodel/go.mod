module github.com/tare-dev/tare/bench/model-server/tinymodel

go 1.26.8

require github.com/ollama/ollama v0.17.4

require golang.org/x/sync v0.17.0 // indirect
