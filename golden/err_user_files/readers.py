class CalibReader:
    def get_next(self):
        return None
