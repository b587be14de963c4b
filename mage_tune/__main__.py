from mage_tune.cli import main

main()
