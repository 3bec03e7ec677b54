module github.com/faultline-dev/faultline/examples/gotest

go 1.26

require github.com/faultline-dev/faultline v0.0.0-00010101000000-000000000000
