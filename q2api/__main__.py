import sys

from q2api.cli.main import main

sys.exit(main())
