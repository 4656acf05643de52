package notes

import (
	"context"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type pathArgs struct {
	Path string `json:"path" jsonschema:"the file's path, e.g. chapters/01.md"`
}

type noteArgs struct {
	Path    string `json:"path" jsonschema:"the note's path, e.g. notes/today.txt"`
	Content string `json:"content" jsonschema:"the whole new content"`
}

// NewMCPHandler serves the same tools as NewHandler over MCP Streamable
// HTTP (the official Go SDK), at every path of the handler: read_file
// (annotated read-only), write_note and delete_file (destructive).
func NewMCPHandler(files *Files) http.Handler {
	srv := mcp.NewServer(&mcp.Implementation{Name: "toolgate-example-notes", Version: "1"}, nil)
	yes, no := true, false
	mcp.AddTool(srv, &mcp.Tool{
		Name: "read_file", Description: "Read a file of the book.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	},
		func(_ context.Context, _ *mcp.CallToolRequest, in pathArgs) (*mcp.CallToolResult, any, error) {
			content, err := files.Read(in.Path)
			if err != nil {
				return toolError(err), nil, nil
			}
			return text(content), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{
		Name: "write_note", Description: "Write (create or replace) a note.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &no},
	},
		func(_ context.Context, _ *mcp.CallToolRequest, in noteArgs) (*mcp.CallToolResult, any, error) {
			if err := files.Write(in.Path, in.Content); err != nil {
				return toolError(err), nil, nil
			}
			return text("wrote " + in.Path), nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{
		Name: "delete_file", Description: "Delete a file.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes},
	},
		func(_ context.Context, _ *mcp.CallToolRequest, in pathArgs) (*mcp.CallToolResult, any, error) {
			if err := files.Delete(in.Path); err != nil {
				return toolError(err), nil, nil
			}
			return text("deleted " + in.Path), nil, nil
		})
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

func toolError(err error) *mcp.CallToolResult {
	r := text(err.Error())
	r.IsError = true
	return r
}

// NewServer serves one file set both ways: MCP Streamable HTTP at /mcp
// (and below it) and the REST tools everywhere else.
func NewServer(files *Files) http.Handler {
	mux := http.NewServeMux()
	m := NewMCPHandler(files)
	mux.Handle("/mcp", m)
	mux.Handle("/mcp/", m)
	mux.Handle("/", NewHandler(files))
	return mux
}
