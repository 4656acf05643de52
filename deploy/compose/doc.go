// Package compose holds the configuration docker-compose.yml mounts into
// toolgate; its test loads the compose file as Docker Compose does.
package compose
