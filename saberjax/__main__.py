"""`python -m saberjax COMMAND [FLAGS]`: the `saberjax` command (saberjax.commands)."""

from saberjax.commands import main

main()
