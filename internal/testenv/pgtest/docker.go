package pgtest

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/ory/dockertest/v3"
	"github.com/ory/dockertest/v3/docker"

	"github.com/outboxd/outboxd/internal/testenv/pgcluster"
)

// defaultDockerMajor is the image startDocker runs when no major is asked for.
const defaultDockerMajor = 16

// startDocker runs postgres:MAJOR (postgres:16 for 0) with the settings
// pgcluster would write.
func startDocker(o pgcluster.Options, major int) (*Server, error) {
	if major == 0 {
		major = defaultDockerMajor
	}
	tag := strconv.Itoa(major)
	pool, err := dockertest.NewPool("")
	if err == nil {
		err = pool.Client.Ping()
	}
	if err != nil {
		return nil, fmt.Errorf("no Docker engine answers: %w", err)
	}
	cmd := []string{"postgres", "-c", "wal_level=logical", "-c", "max_replication_slots=20",
		"-c", "max_wal_senders=20", "-c", "fsync=off", "-c", "full_page_writes=off"}
	for k, v := range o.ExtraConf {
		cmd = append(cmd, "-c", k+"="+v)
	}
	res, err := pool.RunWithOptions(&dockertest.RunOptions{
		Repository: "postgres",
		Tag:        tag,
		Env:        []string{"POSTGRES_HOST_AUTH_METHOD=trust"},
		Cmd:        cmd,
	}, func(hc *docker.HostConfig) {
		hc.AutoRemove = true
		hc.RestartPolicy = docker.RestartPolicy{Name: "no"}
	})
	if err != nil {
		return nil, fmt.Errorf("run postgres:%s: %w", tag, err)
	}
	// The engine removes the container even if this process is killed.
	if err := res.Expire(uint(time.Hour / time.Second)); err != nil {
		pool.Purge(res)
		return nil, err
	}
	hostPort := res.GetHostPort("5432/tcp")
	dsn := func(database string) string {
		return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable", hostPort, url.PathEscape(database))
	}
	pool.MaxWait = timeout
	if err := pool.Retry(func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn("postgres"))
		if err != nil {
			return err
		}
		return conn.Close(ctx)
	}); err != nil {
		pool.Purge(res)
		return nil, fmt.Errorf("postgres container on %s not ready: %w", hostPort, err)
	}
	return &Server{
		dsn:   dsn,
		admin: dsn("postgres"),
		fixed: "pgtest cannot restart a postgres container on the same port",
		close: func() error { return pool.Purge(res) },
	}, nil
}
