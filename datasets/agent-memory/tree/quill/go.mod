module github.com/quillhq/quill

go 1.22

toolchain go1.22.12

require (
	connectrpc.com/connect v1.18.1
	connectrpc.com/vanguard v0.3.0
	github.com/golang-jwt/jwt/v5 v5.2.1
	github.com/google/uuid v1.6.0
	github.com/open-feature/go-sdk v1.14.1
	github.com/tursodatabase/go-libsql v0.0.0-20250905133126-5a9e6e0c6a57
	golang.org/x/time v0.9.0
	google.golang.org/protobuf v1.36.4
)
