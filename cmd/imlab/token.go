package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"imlab/ref/auth"
)

// newTokenCmd: imlab token --uid 1 --did phone [--ttl 24h] prints a bearer
// token signed with IMLAB_SECRET (or the lab secret, with a warning).
func newTokenCmd() *cobra.Command {
	var uid uint64
	var did string
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Print a bearer token for a uid and device (HS256, IMLAB_SECRET)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			secret, err := lookupSecret(cmd, true)
			if err != nil {
				return err
			}
			cfg := auth.DefaultConfig()
			cfg.Secret = secret.value
			a, err := auth.New(cfg)
			if err != nil {
				return err
			}
			tok, err := a.Mint(uid, did, ttl)
			if err != nil {
				return err
			}
			secret.warn(cmd.ErrOrStderr())
			fmt.Fprintln(cmd.OutOrStdout(), tok)
			return nil
		},
	}
	f := cmd.Flags()
	f.Uint64Var(&uid, "uid", 0, "user id (1..2147483647)")
	f.StringVar(&did, "did", "", "device id (1..64 visible ASCII bytes)")
	f.DurationVar(&ttl, "ttl", 24*time.Hour, "lifetime (0: no expiry)")
	f.String("secret", "", "signing secret (default $"+envSecret+")")
	_ = cmd.MarkFlagRequired("uid")
	_ = cmd.MarkFlagRequired("did")
	return cmd
}
