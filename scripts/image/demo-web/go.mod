module portable-lb/demo-web

go 1.26
