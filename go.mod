module github.com/tare-dev/tare

go 1.26.8
