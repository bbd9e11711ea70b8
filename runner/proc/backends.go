package proc

import (
	"fmt"

	"github.com/go-sql-driver/mysql"

	"imlab/scenario"
)

// mysqlAddr is the TCP host:port of a DSN.
func MySQLAddr(dsn string) (string, error) {
	c, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "", fmt.Errorf("%w: mysql dsn: %v", scenario.ErrInvalid, err)
	}
	if c.Net != "tcp" {
		return "", fmt.Errorf("%w: mysql dsn: network %q cannot be proxied (want tcp)", scenario.ErrInvalid, c.Net)
	}
	return c.Addr, nil
}
