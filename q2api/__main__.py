import sys

from q2api.cli import main

sys.exit(main())
