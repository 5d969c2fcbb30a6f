PIP_NO_INDEX=1 PIP_FIND_LINKS=/work/main/.whl make setup
