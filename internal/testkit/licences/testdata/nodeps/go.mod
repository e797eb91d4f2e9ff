module example.com/nodeps

go 1.26
