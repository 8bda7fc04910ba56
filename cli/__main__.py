import sys

from draguard.cli.main import main

sys.exit(main())
